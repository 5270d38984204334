// Engine: the JS class over the C API (moe_engine.h). Methods convert arguments and forward; training
// runs the engine's loop (moe_engine_train) on a std::thread that reports through a bounded ThreadSafeFunction.
#pragma once
#include <napi.h>

#include <memory>
#include <string>

#include "moe_engine.h"
#include "train_loop.h"

namespace moe_addon {

// exportCheckpoint(checkpointDir, outDir, modelType, bf16, expertLayout?, format?): moe_export_checkpoint, without
// an engine (ours streams from its file a tensor at a time); synchronous.
void ExportCheckpoint(const Napi::CallbackInfo& info);

class Engine : public Napi::ObjectWrap<Engine> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Engine(const Napi::CallbackInfo& info);
  ~Engine() override;

  struct Session;  // one start(): the thread and the channel to JS

  // The C API handle, for objects that work on this engine (generation sessions); refused while training.
  moe_engine* Handle(Napi::Env env, const char* what) const {
    RequireIdle(env, what);
    return engine_;
  }

 private:
  void InitFrom(const Napi::CallbackInfo& info);
  void ResumeFrom(const Napi::CallbackInfo& info);
  void SaveCheckpoint(const Napi::CallbackInfo& info);
  void SetData(const Napi::CallbackInfo& info);
  void SetEvalData(const Napi::CallbackInfo& info);
  void ExportHf(const Napi::CallbackInfo& info);
  Napi::Value MeasureExperts(const Napi::CallbackInfo& info);
  void Start(const Napi::CallbackInfo& info);
  void Pause(const Napi::CallbackInfo& info);
  void Resume(const Napi::CallbackInfo& info);
  void Stop(const Napi::CallbackInfo& info);
  void RequestCheckpoint(const Napi::CallbackInfo& info);
  Napi::Value NumParams(const Napi::CallbackInfo& info);
  Napi::Value StepCount(const Napi::CallbackInfo& info);
  Napi::Value BackendName(const Napi::CallbackInfo& info);
  Napi::Value BackendDescription(const Napi::CallbackInfo& info);
  Napi::Value ConfigJson(const Napi::CallbackInfo& info);
  Napi::Value Training(const Napi::CallbackInfo& info);

  // Called on the JS thread when the loop has reported its outcome.
  void EndSession();
  // The engine is driven by one thread: synchronous calls are refused while training.
  void RequireIdle(Napi::Env env, const char* what) const;
  void Check(Napi::Env env, int status) const;

  moe_engine* engine_ = nullptr;
  std::shared_ptr<Session> session_;
  double num_params_ = 0;
  std::string backend_name_, backend_description_, config_json_;

  // ThreadSafeFunction callbacks (JS thread): one message from the loop; the channel closed.
  static void Deliver(Napi::Env env, Napi::Function, std::shared_ptr<Session>* session, TrainMessage* message);
  static void DeliverMessage(Napi::Env env, Session& session, TrainMessage& message);
  static void ChannelClosed(Napi::Env env, void*, std::shared_ptr<Session>* session);
};

}  // namespace moe_addon
