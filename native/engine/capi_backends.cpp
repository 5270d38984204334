// The C API's view of the backend registry (kept apart from capi.cpp: it needs no engine).
#include <memory>
#include <string>

#include "backend/registry.h"
#include "backend/validation.h"
#include "core/error.h"
#include "core/json.h"
#include "include/moe_engine.h"

namespace {

// A backend made here with default options, to ask what it is on this machine: null, with the reason, when it
// cannot be made (never for one the registry says is unusable, which is not tried).
struct MadeHere {
  std::unique_ptr<moe::Backend> backend;
  std::string error;
};
MadeHere make_here(const moe::BackendInfo& b) {
  if (!b.usable) return {};
  try {
    return {moe::make_backend(b.name), ""};
  } catch (const moe::EngineError& e) {
    return {nullptr, e.what()};
  }
}

// Whether the backend passed its self-test on the device it would run on here (backend/validation.h): "" for
// "cpu" (always allowed) and for a backend this machine cannot run.
std::string validation(const moe::BackendInfo& b, const MadeHere& made) {
  if (b.name == "cpu" || !b.usable) return "";
  if (!made.backend) return "unknown: " + made.error;
  try {
    return moe::validation_status_here(b.name, made.backend->device());
  } catch (const moe::EngineError& e) {
    return std::string("unknown: ") + e.what();
  }
}

}  // namespace

extern "C" const char* moe_engine_list_backends(void) {
  static const std::string text = [] {
    moe::json::Value all = moe::json::Value::make_array();
    for (const moe::BackendInfo& b : moe::list_backends()) {
      moe::json::Value o = moe::json::Value::make_object();
      o.set("name", moe::json::Value::of(b.name));
      o.set("description", moe::json::Value::of(b.description));
      o.set("usable", moe::json::Value::of(b.usable));
      o.set("why_not", moe::json::Value::of(b.why_not));
      const MadeHere made = make_here(b);
      o.set("validation", moe::json::Value::of(validation(b, made)));
      o.set("kernels", moe::json::Value::of(made.backend ? made.backend->kernels() : std::string()));
      o.set("bf16_native", moe::json::Value::of(made.backend && made.backend->bf16_native()));
      all.push(std::move(o));
    }
    return moe::json::dump(all);
  }();
  return text.c_str();
}
