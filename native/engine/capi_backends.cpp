// The C API's view of the backend registry (kept apart from capi.cpp: it needs no engine).
#include <memory>
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

// A backend made here with default options, to ask what it picks on this machine; null when it cannot run here.
std::unique_ptr<moe::Backend> made_here(const moe::BackendInfo& b) {
  if (!b.usable) return nullptr;
  try {
    return moe::make_backend(b.name);
  } catch (const moe::EngineError&) {
    return nullptr;
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
      const std::unique_ptr<moe::Backend> made = made_here(b);
      o.set("kernels", moe::json::Value::of(made ? made->kernels() : std::string()));
      o.set("bf16_native", moe::json::Value::of(made && made->bf16_native()));
      all.push(std::move(o));
    }
    return moe::json::dump(all);
  }();
  return text.c_str();
}
