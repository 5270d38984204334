#include "engine_wrap.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace moe_addon {

namespace {

// Steps the training thread may run ahead of JS before it blocks (back-pressure, bounded memory).
constexpr size_t kQueuedMessages = 64;
constexpr size_t kErrorBytes = 4096;

std::string StringArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (info.Length() <= i || !info[i].IsString())
    throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a string");
  return info[i].As<Napi::String>().Utf8Value();
}

int64_t CountOption(Napi::Object options, const char* key) {
  Napi::Value v = options.Get(key);
  if (v.IsUndefined()) return 0;
  const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(d >= 0 && d <= 9007199254740991.0 && d == static_cast<double>(static_cast<int64_t>(d))))
    throw Napi::TypeError::New(options.Env(), std::string("start: ") + key + " must be a non-negative integer");
  return static_cast<int64_t>(d);
}

}  // namespace

struct Engine::Session {
  using Channel = Napi::TypedThreadSafeFunction<std::shared_ptr<Session>, TrainMessage, &Engine::Deliver>;

  // Training thread: blocks while the queue is full; false once the channel is closing.
  bool Post(TrainMessage&& message) {
    std::lock_guard<std::mutex> lock(channel_mutex);
    if (channel_closed) return false;
    auto* queued = new TrainMessage(std::move(message));
    if (channel.BlockingCall(queued) != napi_ok) {
      delete queued;
      channel_closed = true;  // Node-API already dropped this thread's use of the channel
      return false;
    }
    return true;
  }

  void ReleaseChannel() {
    std::lock_guard<std::mutex> lock(channel_mutex);
    if (!channel_closed) channel.Release();
    channel_closed = true;
  }

  std::atomic<int64_t> last_step{0};  // readable from JS while training
  Engine* owner = nullptr;
  Napi::FunctionReference on_step, on_checkpoint, on_done, on_nonfinite;  // on_nonfinite may be empty
  std::thread thread;
  std::mutex channel_mutex;  // orders the thread's channel calls against ChannelClosed
  bool channel_closed = false;
  Channel channel;
};

Napi::Function Engine::Define(Napi::Env env) {
  return DefineClass(env, "Engine",
                     {
                         InstanceMethod<&Engine::InitFrom>("initFrom"),
                         InstanceMethod<&Engine::ResumeFrom>("resumeFrom"),
                         InstanceMethod<&Engine::SaveCheckpoint>("saveCheckpoint"),
                         InstanceMethod<&Engine::SetData>("setData"),
                         InstanceMethod<&Engine::SetEvalData>("setEvalData"),
                         InstanceMethod<&Engine::ExportHf>("exportHf"),
                         InstanceMethod<&Engine::MeasureExperts>("measureExperts"),
                         InstanceMethod<&Engine::Start>("start"),
                         InstanceMethod<&Engine::Pause>("pause"),
                         InstanceMethod<&Engine::Resume>("resume"),
                         InstanceMethod<&Engine::Stop>("stop"),
                         InstanceMethod<&Engine::RequestCheckpoint>("requestCheckpoint"),
                         InstanceAccessor<&Engine::NumParams>("numParams"),
                         InstanceAccessor<&Engine::StepCount>("stepCount"),
                         InstanceAccessor<&Engine::BackendName>("backendName"),
                         InstanceAccessor<&Engine::BackendDescription>("backendDescription"),
                         InstanceAccessor<&Engine::ConfigJson>("configJson"),
                         InstanceAccessor<&Engine::Training>("training"),
                     });
}

Engine::Engine(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Engine>(info) {
  const std::string config = StringArg(info, 0, "configJson");
  auto given = [&](size_t i) { return info.Length() > i && !info[i].IsUndefined() && !info[i].IsNull(); };
  const std::string init_dir = given(1) ? StringArg(info, 1, "initDir") : std::string();
  const std::string run_dir = given(2) ? StringArg(info, 2, "runDir") : std::string();
  // { dir, resume }: a folder the engine loads as it opens (its weights never drawn from the seed first).
  std::string load_dir;
  bool load_resume = false;
  if (given(3)) {
    if (!info[3].IsObject()) throw Napi::TypeError::New(info.Env(), "Engine: load must be { dir, resume }");
    Napi::Object load = info[3].As<Napi::Object>();
    if (!load.Get("dir").IsString()) throw Napi::TypeError::New(info.Env(), "Engine: load.dir must be a string");
    load_dir = load.Get("dir").As<Napi::String>().Utf8Value();
    load_resume = load.Get("resume").ToBoolean().Value();
  }
  char error[kErrorBytes] = {0};
  moe_engine_options options{};
  options.struct_size = sizeof options;
  options.config_json = config.c_str();
  options.init_dir = given(1) ? init_dir.c_str() : nullptr;
  options.run_dir = given(2) ? run_dir.c_str() : nullptr;
  options.load_dir = load_dir.empty() ? nullptr : load_dir.c_str();
  options.load_resume = load_resume ? 1 : 0;
  engine_ = moe_engine_open(&options, error, sizeof error);
  if (!engine_) throw Napi::Error::New(info.Env(), error[0] ? error : "the engine could not be created");
  num_params_ = static_cast<double>(moe_engine_num_params(engine_));
  backend_name_ = moe_engine_backend_name(engine_);
  backend_description_ = moe_engine_backend_description(engine_);
  config_json_ = moe_engine_config_json(engine_);
}

Engine::~Engine() {
  // Only reached with a live session when the environment is torn down mid-run (a running engine
  // holds a strong reference to itself): the channel is already closing, so the thread cannot block.
  if (session_) {
    moe_engine_request_stop(engine_);
    if (session_->thread.joinable()) session_->thread.join();
    session_.reset();
  }
  moe_engine_destroy(engine_);
}

void Engine::InitFrom(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "initFrom");
  Check(info.Env(), moe_engine_init_from(engine_, StringArg(info, 0, "dir").c_str()));
}

void Engine::ResumeFrom(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "resumeFrom");
  Check(info.Env(), moe_engine_resume_from(engine_, StringArg(info, 0, "dir").c_str()));
}

void Engine::SaveCheckpoint(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "saveCheckpoint");
  Check(info.Env(), moe_engine_save_checkpoint(engine_, StringArg(info, 0, "dir").c_str()));
}

void Engine::SetData(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "setData");
  Check(info.Env(), moe_engine_set_data(engine_, StringArg(info, 0, "path").c_str()));
}

void Engine::SetEvalData(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "setEvalData");
  Check(info.Env(), moe_engine_set_eval_data(engine_, StringArg(info, 0, "path").c_str()));
}

namespace {

// The export arguments from `at` on: bf16, then optional expertLayout ("per-expert" | "fused"; absent or undefined:
// the model type's usual layout) and format ("checkpoint", the whole model with LoRA adapters merged, the
// default | "adapter", the PEFT adapter), then an optional base model folder (an adapter export names it; an
// adapter folder exported whole is merged into it), kept in base_dir, which the options point into.
moe_export_options ExportOptions(const Napi::CallbackInfo& info, size_t at, const char* what, std::string& base_dir) {
  const bool bf16 = info.Length() > at && info[at].ToBoolean().Value();
  const std::string layout = info.Length() > at + 1 && info[at + 1].IsString() ? info[at + 1].As<Napi::String>().Utf8Value() : "";
  const std::string format = info.Length() > at + 2 && info[at + 2].IsString() ? info[at + 2].As<Napi::String>().Utf8Value() : "";
  moe_export_options options{};
  options.struct_size = sizeof options;
  options.dtype = bf16 ? MOE_EXPORT_BF16 : MOE_EXPORT_F32;
  if (layout == "per-expert") options.expert_layout = MOE_EXPERTS_PER_EXPERT;
  else if (layout == "fused") options.expert_layout = MOE_EXPERTS_FUSED;
  else if (!layout.empty())
    throw Napi::TypeError::New(info.Env(), std::string(what) + ": expertLayout \"" + layout + "\" is not \"per-expert\" or \"fused\"");
  if (format == "adapter") options.format = MOE_EXPORT_ADAPTER;
  else if (!format.empty() && format != "checkpoint")
    throw Napi::TypeError::New(info.Env(), std::string(what) + ": format \"" + format + "\" is not \"checkpoint\" or \"adapter\"");
  if (info.Length() > at + 3 && info[at + 3].IsString()) {
    base_dir = info[at + 3].As<Napi::String>().Utf8Value();
    options.base_dir = base_dir.c_str();
  }
  return options;
}

}  // namespace

void Engine::ExportHf(const Napi::CallbackInfo& info) {
  RequireIdle(info.Env(), "exportHf");
  const std::string dir = StringArg(info, 0, "dir");
  const std::string model_type = StringArg(info, 1, "modelType");
  std::string base_dir;
  const moe_export_options options = ExportOptions(info, 2, "exportHf", base_dir);
  Check(info.Env(), moe_engine_export_hf_with(engine_, dir.c_str(), model_type.c_str(), &options));
}

void ExportCheckpoint(const Napi::CallbackInfo& info) {
  const std::string checkpoint = StringArg(info, 0, "checkpointDir");
  const std::string out = StringArg(info, 1, "outDir");
  const std::string model_type = StringArg(info, 2, "modelType");
  std::string base_dir;
  const moe_export_options options = ExportOptions(info, 3, "exportCheckpoint", base_dir);
  char err[4096] = {0};
  if (moe_export_checkpoint(checkpoint.c_str(), out.c_str(), model_type.c_str(), &options, err, sizeof err) != MOE_OK)
    throw Napi::Error::New(info.Env(), err);
}

// measureExperts(tokenFile, {batches, threshold, score: "gate" | "tokens"}) -> the engine's JSON text
// (moe_engine_measure_experts); synchronous: the forward passes run on the calling thread.
Napi::Value Engine::MeasureExperts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RequireIdle(env, "measureExperts");
  const std::string file = StringArg(info, 0, "tokenFile");
  if (info.Length() < 2 || !info[1].IsObject())
    throw Napi::TypeError::New(env, "measureExperts(tokenFile, {batches, threshold, score})");
  Napi::Object o = info[1].As<Napi::Object>();
  const Napi::Value threshold = o.Get("threshold"), score = o.Get("score");
  if (!threshold.IsNumber()) throw Napi::TypeError::New(env, "measureExperts: threshold must be a number");
  const std::string score_name = score.IsString() ? score.As<Napi::String>().Utf8Value() : "";
  if (score_name != "gate" && score_name != "tokens")
    throw Napi::TypeError::New(env, "measureExperts: score must be \"gate\" or \"tokens\"");
  moe_expert_shares_options options{};
  options.struct_size = sizeof options;
  options.token_file = file.c_str();
  options.batches = static_cast<int32_t>(CountOption(o, "batches"));
  options.threshold = threshold.As<Napi::Number>().DoubleValue();
  options.score = score_name == "gate" ? MOE_SHARE_GATE : MOE_SHARE_TOKENS;
  const char* json = nullptr;
  Check(env, moe_engine_measure_experts(engine_, &options, &json));
  return Napi::String::New(env, json ? json : "");
}

void Engine::Start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RequireIdle(env, "start");
  if (info.Length() < 4 || !info[0].IsObject() || !info[1].IsFunction() || !info[2].IsFunction() ||
      !info[3].IsFunction())
    throw Napi::TypeError::New(env, "start(options, onStep, onCheckpoint, onDone): an object and three functions");
  const int64_t total_steps = CountOption(info[0].As<Napi::Object>(), "totalSteps");

  auto session = std::make_shared<Session>();
  session->owner = this;
  session->on_step = Napi::Persistent(info[1].As<Napi::Function>());
  session->on_checkpoint = Napi::Persistent(info[2].As<Napi::Function>());
  session->on_done = Napi::Persistent(info[3].As<Napi::Function>());
  if (info.Length() > 4 && info[4].IsFunction()) session->on_nonfinite = Napi::Persistent(info[4].As<Napi::Function>());
  session->channel = Session::Channel::New(env, "moe-engine-training", kQueuedMessages, 1,
                                           new std::shared_ptr<Session>(session), &Engine::ChannelClosed,
                                           static_cast<void*>(nullptr));
  // Kept alive while training even if JS drops it; ChannelClosed lets go.
  Ref();
  session_ = session;
  try {
    session->thread = std::thread([s = session.get(), engine = engine_, total_steps] {
      train(engine, total_steps, s->last_step, [s](TrainMessage&& m) { return s->Post(std::move(m)); });
      s->ReleaseChannel();
    });
  } catch (const std::exception& e) {
    session_.reset();
    session->ReleaseChannel();
    throw Napi::Error::New(env, std::string("start: cannot create the training thread: ") + e.what());
  }
}

void Engine::Pause(const Napi::CallbackInfo&) {
  if (session_) moe_engine_set_paused(engine_, 1);
}

void Engine::Resume(const Napi::CallbackInfo&) {
  if (session_) moe_engine_set_paused(engine_, 0);
}

void Engine::Stop(const Napi::CallbackInfo&) {
  if (session_) moe_engine_request_stop(engine_);
}

void Engine::RequestCheckpoint(const Napi::CallbackInfo& info) {
  if (!session_) throw Napi::Error::New(info.Env(), "requestCheckpoint: the engine is not training; use saveCheckpoint");
  moe_engine_request_checkpoint(engine_);
}

Napi::Value Engine::NumParams(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), num_params_); }

Napi::Value Engine::StepCount(const Napi::CallbackInfo& info) {
  const int64_t step = session_ ? session_->last_step.load() : moe_engine_step_count(engine_);
  return Napi::Number::New(info.Env(), static_cast<double>(step));
}

Napi::Value Engine::BackendName(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), backend_name_); }
Napi::Value Engine::BackendDescription(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), backend_description_);
}

Napi::Value Engine::ConfigJson(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), config_json_); }

Napi::Value Engine::Training(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), session_ != nullptr);
}

void Engine::EndSession() {
  if (session_ && session_->thread.joinable()) session_->thread.join();
  session_.reset();
}

void Engine::RequireIdle(Napi::Env env, const char* what) const {
  if (session_) throw Napi::Error::New(env, std::string(what) + ": the engine is training; stop it first");
}

void Engine::Check(Napi::Env env, int status) const {
  if (status != MOE_OK) throw Napi::Error::New(env, moe_engine_last_error(engine_));
}

void Engine::Deliver(Napi::Env env, Napi::Function, std::shared_ptr<Session>* context, TrainMessage* raw) {
  std::unique_ptr<TrainMessage> message(raw);
  if (env == nullptr || !message) return;  // the channel is being torn down
  Session& s = **context;
  try {
    DeliverMessage(env, s, *message);
  } catch (const Napi::Error& e) {
    // A throwing callback is the caller's bug: surface it as an uncaught exception (Node 20 would
    // otherwise only print a deprecation warning for errors thrown from thread-safe calls).
    napi_fatal_exception(env, e.Value());
  }
}

void Engine::DeliverMessage(Napi::Env env, Session& s, TrainMessage& message) {
  switch (message.kind) {
    case TrainMessage::Kind::Step: {
      // A copy into a V8-owned buffer: Electron's memory cage forbids external array buffers.
      Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, message.record.size());
      std::memcpy(buffer.Data(), message.record.data(), message.record.size());
      s.on_step.Call({buffer});
      break;
    }
    case TrainMessage::Kind::Checkpoint:
      s.on_checkpoint.Call(
          {Napi::Number::New(env, static_cast<double>(message.step)), Napi::String::New(env, message.text)});
      break;
    case TrainMessage::Kind::NonFinite:
      if (!s.on_nonfinite.IsEmpty())
        s.on_nonfinite.Call(
            {Napi::Number::New(env, static_cast<double>(message.step)), Napi::String::New(env, message.text)});
      break;
    case TrainMessage::Kind::Done: {
      s.owner->EndSession();
      std::vector<napi_value> args{Napi::String::New(env, message.text)};
      if (!message.error.empty()) args.push_back(Napi::String::New(env, message.error));
      s.on_done.Call(args);
      break;
    }
  }
}

void Engine::ChannelClosed(Napi::Env, void*, std::shared_ptr<Session>* context) {
  std::unique_ptr<std::shared_ptr<Session>> holder(context);
  Session& s = **context;
  {
    std::lock_guard<std::mutex> lock(s.channel_mutex);
    s.channel_closed = true;
  }
  s.owner->Unref();
}

}  // namespace moe_addon
