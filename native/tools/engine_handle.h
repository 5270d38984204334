// RAII over the C API handle for the CLI commands: a failed call throws with the engine's message.
#pragma once
#include <stdexcept>
#include <string>

#include "moe_engine.h"

namespace cli {

class Engine {
 public:
  Engine(const std::string& config_json, const std::string& init_dir) {
    char err[4096];
    e_ = moe_engine_create(config_json.c_str(), init_dir.empty() ? nullptr : init_dir.c_str(), err, sizeof err);
    if (!e_) throw std::runtime_error(err);
  }
  ~Engine() { moe_engine_destroy(e_); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  moe_engine* get() const { return e_; }
  // Returns the status for codes a caller handles (MOE_STOPPED, MOE_FINISHED); throws on MOE_ERROR.
  int check(int status) const {
    if (status == MOE_ERROR) throw std::runtime_error(moe_engine_last_error(e_));
    return status;
  }

 private:
  moe_engine* e_ = nullptr;
};

}  // namespace cli
