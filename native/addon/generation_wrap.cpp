#include "generation_wrap.h"

#include <string>
#include <vector>

#include "engine_wrap.h"

namespace moe_addon {

namespace {

double NumberOption(Napi::Object o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("generation: ") + key + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

int32_t ExpertHome(Napi::Object o) {
  Napi::Value v = o.Get("expertHome");
  if (v.IsUndefined() || v.IsNull()) return MOE_EXPERTS_RESIDENT;
  const std::string home = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (home == "resident") return MOE_EXPERTS_RESIDENT;
  if (home == "host") return MOE_EXPERTS_HOST;
  if (home == "ssd") return MOE_EXPERTS_SSD;
  throw Napi::TypeError::New(o.Env(), "generation: expertHome must be \"resident\", \"host\" or \"ssd\"");
}

}  // namespace

Napi::Function Generation::Define(Napi::Env env) {
  return DefineClass(env, "Generation",
                     {
                         InstanceMethod<&Generation::Feed>("feed"),
                         InstanceMethod<&Generation::Step>("step"),
                         InstanceMethod<&Generation::Reset>("reset"),
                         InstanceMethod<&Generation::Close>("close"),
                         InstanceMethod<&Generation::ExpertStats>("expertStats"),
                         InstanceAccessor<&Generation::Position>("position"),
                     });
}

Generation::Generation(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Generation>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !(info[0].IsObject() || info[0].IsString()))
    throw Napi::TypeError::New(env, "generation: an Engine or a model folder is required");
  Napi::Object o = info.Length() > 1 && info[1].IsObject() ? info[1].As<Napi::Object>() : Napi::Object::New(env);
  moe_generate_options options{};
  options.struct_size = sizeof options;
  options.temperature = NumberOption(o, "temperature", 0);
  options.top_k = static_cast<int32_t>(NumberOption(o, "topK", 0));
  options.top_p = NumberOption(o, "topP", 1);
  options.seed = static_cast<uint64_t>(NumberOption(o, "seed", 0));
  options.expert_home = ExpertHome(o);
  options.expert_slots = static_cast<int32_t>(NumberOption(o, "expertSlots", 0));
  options.cache_experts = static_cast<int32_t>(NumberOption(o, "cacheExperts", 0));
  std::string ssd_dir, base_dir;
  if (Napi::Value d = o.Get("ssdDir"); d.IsString()) {
    ssd_dir = d.As<Napi::String>().Utf8Value();
    options.ssd_dir = ssd_dir.c_str();
  }
  if (Napi::Value d = o.Get("baseDir"); d.IsString()) {
    base_dir = d.As<Napi::String>().Utf8Value();
    options.base_dir = base_dir.c_str();
  }
  if (info[0].IsString()) {
    // A model folder: the session builds its own model (config: an optional JSON string's train section).
    const std::string dir = info[0].As<Napi::String>().Utf8Value();
    std::string config;
    if (info.Length() > 2 && info[2].IsString()) config = info[2].As<Napi::String>().Utf8Value();
    char err[2048] = {0};
    generation_ = moe_generation_open(dir.c_str(), config.empty() ? nullptr : config.c_str(), &options, err, sizeof err);
    if (!generation_) throw Napi::Error::New(env, err);
    return;
  }
  Napi::Object engine_object = info[0].As<Napi::Object>();
  Engine* engine = Napi::ObjectWrap<Engine>::Unwrap(engine_object);
  moe_engine* handle = engine->Handle(env, "generation");
  generation_ = moe_generation_create(handle, &options);
  if (!generation_) throw Napi::Error::New(env, moe_engine_last_error(handle));
  engine_ = Napi::Persistent(engine_object);
}

Generation::~Generation() { moe_generation_destroy(generation_); }

moe_generation* Generation::Live(Napi::Env env) const {
  if (!generation_) throw Napi::Error::New(env, "generation: the session is closed");
  return generation_;
}

void Generation::Feed(const Napi::CallbackInfo& info) {
  moe_generation* g = Live(info.Env());
  std::vector<int32_t> tokens;
  if (info.Length() > 0 && info[0].IsTypedArray()) {
    Napi::TypedArray a = info[0].As<Napi::TypedArray>();
    for (size_t i = 0; i < a.ElementLength(); ++i) tokens.push_back(a.Get(i).As<Napi::Number>().Int32Value());
  } else if (info.Length() > 0 && info[0].IsArray()) {
    Napi::Array a = info[0].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) tokens.push_back(a.Get(i).As<Napi::Number>().Int32Value());
  } else {
    throw Napi::TypeError::New(info.Env(), "feed: tokens must be an array of token ids");
  }
  if (moe_generation_feed(g, tokens.data(), static_cast<int32_t>(tokens.size())) != MOE_OK)
    throw Napi::Error::New(info.Env(), moe_generation_last_error(g));
}

// { token, position, layers: number[], experts: number[][] } per MoE layer, or null once max_seq_len is reached.
Napi::Value Generation::Step(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  moe_generation* g = Live(env);
  moe_generated_token t{};
  t.struct_size = sizeof t;
  const int status = moe_generation_step(g, &t);
  if (status == MOE_FINISHED) return env.Null();
  if (status != MOE_OK) throw Napi::Error::New(env, moe_generation_last_error(g));
  Napi::Object out = Napi::Object::New(env);
  out.Set("token", t.token);
  out.Set("position", t.position);
  Napi::Array layers = Napi::Array::New(env, t.moe_layers);
  Napi::Array experts = Napi::Array::New(env, t.moe_layers);
  for (int m = 0; m < t.moe_layers; ++m) {
    layers.Set(m, t.layers[m]);
    Napi::Array chosen = Napi::Array::New(env, t.top_k);
    for (int k = 0; k < t.top_k; ++k) chosen.Set(k, t.experts[m * t.top_k + k]);
    experts.Set(m, chosen);
  }
  out.Set("layers", layers);
  out.Set("experts", experts);
  return out;
}

void Generation::Reset(const Napi::CallbackInfo& info) {
  moe_generation* g = Live(info.Env());
  if (moe_generation_reset(g) != MOE_OK) throw Napi::Error::New(info.Env(), moe_generation_last_error(g));
}

void Generation::Close(const Napi::CallbackInfo&) {
  moe_generation_destroy(generation_);
  generation_ = nullptr;
  engine_.Reset();
}

Napi::Value Generation::Position(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), moe_generation_position(Live(info.Env())));
}

Napi::Value Generation::ExpertStats(const Napi::CallbackInfo& info) {
  int64_t misses = 0, hits = 0, bytes = 0;
  moe_generation_expert_stats(Live(info.Env()), &misses, &hits, &bytes);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("misses", static_cast<double>(misses));
  out.Set("hits", static_cast<double>(hits));
  out.Set("bytesUploaded", static_cast<double>(bytes));
  return out;
}

}  // namespace moe_addon
