// Generation: the JS class over a C API generation session (moe_generation_*) on an Engine, which it keeps alive,
// or on a model folder (moe_generation_open), whose model the session owns.
// Steps run on the calling thread; hosts drive them from a worker thread and stream the tokens themselves.
#pragma once
#include <napi.h>

#include "moe_engine.h"

namespace moe_addon {

class Generation : public Napi::ObjectWrap<Generation> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Generation(const Napi::CallbackInfo& info);
  ~Generation() override;

 private:
  void Feed(const Napi::CallbackInfo& info);
  Napi::Value Step(const Napi::CallbackInfo& info);
  void Reset(const Napi::CallbackInfo& info);
  void Close(const Napi::CallbackInfo& info);
  Napi::Value Position(const Napi::CallbackInfo& info);
  Napi::Value ExpertStats(const Napi::CallbackInfo& info);
  moe_generation* Live(Napi::Env env) const;

  Napi::ObjectReference engine_;  // empty for a session on a model folder
  moe_generation* generation_ = nullptr;
};

}  // namespace moe_addon
