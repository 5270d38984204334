// The C API's view of the backend registry (kept apart from capi.cpp: it needs no engine).
#include <string>

#include "backend/registry.h"
#include "core/json.h"
#include "include/moe_engine.h"

extern "C" const char* moe_engine_list_backends(void) {
  static const std::string text = [] {
    moe::json::Value all = moe::json::Value::make_array();
    for (const moe::BackendInfo& b : moe::list_backends()) {
      moe::json::Value o = moe::json::Value::make_object();
      o.set("name", moe::json::Value::of(b.name));
      o.set("description", moe::json::Value::of(b.description));
      o.set("usable", moe::json::Value::of(b.usable));
      o.set("why_not", moe::json::Value::of(b.why_not));
      all.push(std::move(o));
    }
    return moe::json::dump(all);
  }();
  return text.c_str();
}
