#include "describe_model.h"

#include <string>

#include "moe_engine.h"

namespace moe_addon {

Napi::Value DescribeModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "describeModel: a config JSON string");
  const std::string config = info[0].As<Napi::String>().Utf8Value();
  std::string out(4096, '\0');
  int64_t n = moe_model_describe(config.c_str(), out.data(), out.size());
  if (n >= static_cast<int64_t>(out.size())) {  // too small: the length is known now
    out.assign(static_cast<size_t>(n) + 1, '\0');
    n = moe_model_describe(config.c_str(), out.data(), out.size());
  }
  if (n < 0) throw Napi::Error::New(env, out.c_str());
  out.resize(static_cast<size_t>(n));
  return Napi::String::New(env, out);
}

Napi::Value InspectHf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "inspectHf: a folder path string");
  const std::string dir = info[0].As<Napi::String>().Utf8Value();
  std::string out(1 << 16, '\0');
  int64_t n = moe_hf_inspect(dir.c_str(), out.data(), out.size());
  if (n >= static_cast<int64_t>(out.size())) {
    out.assign(static_cast<size_t>(n) + 1, '\0');
    n = moe_hf_inspect(dir.c_str(), out.data(), out.size());
  }
  if (n < 0) throw Napi::Error::New(env, out.c_str());
  out.resize(static_cast<size_t>(n));
  return Napi::String::New(env, out);
}

}  // namespace moe_addon
