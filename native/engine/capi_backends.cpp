// The C API's view of the backend registry (kept apart from capi.cpp: it needs no engine).
#include <string>

#include "backend/registry.h"
#include "backend/validation.h"
#include "core/error.h"
#include "core/json.h"
#include "include/moe_engine.h"

namespace {

// Whether the backend passed its self-test on the device it would run on here (backend/validation.h): "" for
// "cpu" (always allowed) and for a backend this machine cannot run.
std::string validation(const moe::BackendInfo& b) {
  if (b.name == "cpu" || !b.usable) return "";
  try {
    return moe::validation_status_here(b.name, moe::make_backend(b.name)->device());
  } catch (const moe::EngineError& e) {
    return std::string("unknown: ") + e.what();
  }
}

// What a backend made here with default options reports of its kernels (Backend::kernels); "" when it cannot run.
std::string kernels(const moe::BackendInfo& b) {
  if (!b.usable) return "";
  try {
    return moe::make_backend(b.name)->kernels();
  } catch (const moe::EngineError&) {
    return "";
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
      o.set("validation", moe::json::Value::of(validation(b)));
      o.set("kernels", moe::json::Value::of(kernels(b)));
      all.push(std::move(o));
    }
    return moe::json::dump(all);
  }();
  return text.c_str();
}
