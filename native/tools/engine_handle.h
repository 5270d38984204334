// RAII over the C API handle for the CLI commands: a failed call throws with the engine's message.
#pragma once
#include <stdexcept>
#include <string>

#include "moe_engine.h"

namespace cli {

class Engine {
 public:
  // run_dir (may be empty): where moe_engine_train writes checkpoints and the SSD tier its expert file.
  // load_dir (may be empty): a folder loaded as the engine opens (init_from, or resume_from with resume), its
  // weights never drawn from the seed first.
  Engine(const std::string& config_json, const std::string& init_dir, const std::string& run_dir = "",
         const std::string& load_dir = "", bool resume = false) {
    char err[4096];
    moe_engine_options options{};
    options.struct_size = sizeof options;
    options.config_json = config_json.c_str();
    options.init_dir = init_dir.empty() ? nullptr : init_dir.c_str();
    options.run_dir = run_dir.empty() ? nullptr : run_dir.c_str();
    options.load_dir = load_dir.empty() ? nullptr : load_dir.c_str();
    options.load_resume = resume ? 1 : 0;
    e_ = moe_engine_open(&options, err, sizeof err);
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
