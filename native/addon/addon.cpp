// The moe_engine_addon module: the Engine class and packStepRecord (the C++ packing, exposed so the
// TS decoder can be tested against it).
#include <napi.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "describe_model.h"
#include "engine_wrap.h"
#include "generation_wrap.h"
#include "step_record_pack.h"

namespace moe_addon {
namespace {

double NumberField(Napi::Object o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("packStepRecord: ") + key + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

// The offload and SSD fields may be left out of an offloaded record: 0 then.
double OptionalNumberField(Napi::Object o, const char* key) {
  return o.Get(key).IsUndefined() ? 0.0 : NumberField(o, key);
}

// Flattens an optional [layer][expert] array of small codes (tiers, pins); false when absent.
bool ByteLayers(Napi::Object o, const char* key, std::vector<uint8_t>& out) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return false;
  if (!v.IsArray()) throw Napi::TypeError::New(o.Env(), std::string("packStepRecord: ") + key + " must be an array");
  Napi::Array layers = v.As<Napi::Array>();
  for (uint32_t l = 0; l < layers.Length(); ++l) {
    Napi::Object layer = layers.Get(l).As<Napi::Object>();
    const uint32_t n = layer.Get("length").As<Napi::Number>().Uint32Value();
    for (uint32_t e = 0; e < n; ++e) out.push_back(static_cast<uint8_t>(layer.Get(e).As<Napi::Number>().Uint32Value()));
  }
  return true;
}

// The flattened placement of a record ({devices, layers: [{imbalanceBefore, imbalanceAfter, spilledTokens,
// movedExperts, loadBefore, loadAfter, expertDevice, execution?: {deviceBusyMs, criticalMs, wallMs, predictedMs,
// tokenBytes, weightBytes, offloadBytes, partitions, reuseStrategy}}], devicePeakBytes?}), as moe_step_record
// points at it. executed: every layer has its execution and the record its devicePeakBytes.
struct PlacementArrays {
  int32_t devices = 0;
  std::vector<double> imbalance;
  std::vector<int64_t> loads, spilled;
  std::vector<int32_t> moved, expert_device, expert_spilled;
  bool executed = false;
  std::vector<double> device_busy_ms, layer_ms;
  std::vector<int64_t> layer_bytes, device_peak_bytes;
  std::vector<int32_t> layer_pipeline;
};

void AppendNumbers(Napi::Object array, auto& out) {
  const uint32_t n = array.Get("length").As<Napi::Number>().Uint32Value();
  for (uint32_t i = 0; i < n; ++i)
    out.push_back(static_cast<std::remove_reference_t<decltype(out)>::value_type>(
        array.Get(i).As<Napi::Number>().DoubleValue()));
}

bool Placement(Napi::Object o, PlacementArrays& p) {
  Napi::Value v = o.Get("placement");
  if (v.IsUndefined()) return false;
  Napi::Object placement = v.As<Napi::Object>();
  p.devices = static_cast<int32_t>(NumberField(placement, "devices"));
  Napi::Array layers = placement.Get("layers").As<Napi::Array>();
  const bool peaks = placement.Get("devicePeakBytes").IsObject();
  uint32_t executed_layers = 0;
  for (uint32_t l = 0; l < layers.Length(); ++l) {
    Napi::Object layer = layers.Get(l).As<Napi::Object>();
    p.imbalance.push_back(NumberField(layer, "imbalanceBefore"));
    p.imbalance.push_back(NumberField(layer, "imbalanceAfter"));
    p.spilled.push_back(static_cast<int64_t>(NumberField(layer, "spilledTokens")));
    p.moved.push_back(static_cast<int32_t>(NumberField(layer, "movedExperts")));
    AppendNumbers(layer.Get("loadBefore").As<Napi::Object>(), p.loads);
    AppendNumbers(layer.Get("loadAfter").As<Napi::Object>(), p.loads);
    AppendNumbers(layer.Get("expertDevice").As<Napi::Object>(), p.expert_device);
    Napi::Value execution = layer.Get("execution");
    if (!execution.IsObject()) continue;
    ++executed_layers;
    Napi::Object x = execution.As<Napi::Object>();
    AppendNumbers(x.Get("deviceBusyMs").As<Napi::Object>(), p.device_busy_ms);
    for (const char* key : {"criticalMs", "wallMs", "predictedMs"}) p.layer_ms.push_back(NumberField(x, key));
    for (const char* key : {"tokenBytes", "weightBytes", "offloadBytes"})
      p.layer_bytes.push_back(static_cast<int64_t>(NumberField(x, key)));
    for (const char* key : {"partitions", "reuseStrategy"}) p.layer_pipeline.push_back(static_cast<int32_t>(NumberField(x, key)));
  }
  p.executed = peaks || executed_layers > 0;
  if (!p.executed) return true;
  if (peaks) AppendNumbers(placement.Get("devicePeakBytes").As<Napi::Object>(), p.device_peak_bytes);
  const size_t d = static_cast<size_t>(p.devices > 0 ? p.devices : 0);
  if (!peaks || executed_layers != layers.Length() || p.device_busy_ms.size() != layers.Length() * d ||
      p.device_peak_bytes.size() != d)
    throw Napi::TypeError::New(o.Env(), "packStepRecord: the execution needs every layer's deviceBusyMs and "
                                        "devicePeakBytes, one entry per device");
  return true;
}

// packStepRecord({the table's scalars by name (moe_step_fields.h), expertTokens: ArrayLike<number>[], for an
// offloaded step tiers and pins, selectionBias for a model with a selection bias, and with placement a `placement` as EngineStepRecord's, its layers' execution
// and devicePeakBytes included}) -> ArrayBuffer
Napi::Value PackStepRecord(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "packStepRecord: a record object");
  Napi::Object r = info[0].As<Napi::Object>();
  if (!r.Get("expertTokens").IsArray()) throw Napi::TypeError::New(env, "packStepRecord: expertTokens must be an array");
  Napi::Array layers = r.Get("expertTokens").As<Napi::Array>();
  std::vector<int32_t> experts_per_layer, expert_tokens;
  for (uint32_t l = 0; l < layers.Length(); ++l) {
    Napi::Object layer = layers.Get(l).As<Napi::Object>();
    const uint32_t n = layer.Get("length").As<Napi::Number>().Uint32Value();
    experts_per_layer.push_back(static_cast<int32_t>(n));
    for (uint32_t e = 0; e < n; ++e) expert_tokens.push_back(layer.Get(e).As<Napi::Number>().Int32Value());
  }
  moe_step_record record{sizeof(moe_step_record)};
  record.n_moe_layers = static_cast<int32_t>(experts_per_layer.size());
  record.experts_per_layer = experts_per_layer.data();
  record.expert_tokens = expert_tokens.data();
  std::vector<uint8_t> tiers, pins;
  const bool offloaded = ByteLayers(r, "tiers", tiers) && ByteLayers(r, "pins", pins);
  // The table's scalars: those recorded on every step are required, the offload and SSD groups optional (0).
#define MOE_STEP_SCALAR_FIELD(name, c_type, unit, group, label, meaning)                        \
  if (!moe_step_group_offload_only(group)) record.name = static_cast<c_type>(NumberField(r, #name)); \
  else if (offloaded) record.name = static_cast<c_type>(OptionalNumberField(r, #name));
#define MOE_STEP_ARRAY_SKIP(name, c_type, meaning)
  MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_FIELD, MOE_STEP_ARRAY_SKIP)
#undef MOE_STEP_SCALAR_FIELD
#undef MOE_STEP_ARRAY_SKIP
  if (offloaded) {
    record.offloaded = 1;
    record.expert_tiers = tiers.data();
    record.expert_pinned = pins.data();
  }
  std::vector<float> bias;
  if (Napi::Value sb = r.Get("selectionBias"); !sb.IsUndefined()) {
    if (!sb.IsArray()) throw Napi::TypeError::New(env, "packStepRecord: selectionBias must be an array");
    Napi::Array bias_layers = sb.As<Napi::Array>();
    for (uint32_t l = 0; l < bias_layers.Length(); ++l) {
      Napi::Object layer = bias_layers.Get(l).As<Napi::Object>();
      const uint32_t n = layer.Get("length").As<Napi::Number>().Uint32Value();
      for (uint32_t e = 0; e < n; ++e) bias.push_back(layer.Get(e).As<Napi::Number>().FloatValue());
    }
    if (bias.size() != expert_tokens.size())
      throw Napi::TypeError::New(env, "packStepRecord: selectionBias must have the shape of expertTokens");
    record.selection_bias = bias.data();
  }
  PlacementArrays placement;
  if (Placement(r, placement)) {
    Napi::Value spilled = r.Get("spilledTokens");
    if (spilled.IsArray()) {
      Napi::Array spilled_layers = spilled.As<Napi::Array>();
      for (uint32_t l = 0; l < spilled_layers.Length(); ++l)
        AppendNumbers(spilled_layers.Get(l).As<Napi::Object>(), placement.expert_spilled);
      if (placement.expert_spilled.size() != expert_tokens.size())
        throw Napi::TypeError::New(env, "packStepRecord: spilledTokens must have the shape of expertTokens");
      record.expert_spilled = placement.expert_spilled.data();
    }
    record.n_devices = placement.devices;
    record.imbalance = placement.imbalance.data();
    record.device_loads = placement.loads.data();
    record.spilled_tokens = placement.spilled.data();
    record.moved_experts = placement.moved.data();
    record.expert_device = placement.expert_device.data();
    if (placement.executed) {
      record.device_busy_ms = placement.device_busy_ms.data();
      record.layer_ms = placement.layer_ms.data();
      record.layer_bytes = placement.layer_bytes.data();
      record.layer_pipeline = placement.layer_pipeline.data();
      record.device_peak_bytes = placement.device_peak_bytes.data();
    }
  }
  const std::vector<uint8_t> packed = pack_step_record(record);
  Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, packed.size());
  std::memcpy(buffer.Data(), packed.data(), packed.size());
  return buffer;
}

}  // namespace
}  // namespace moe_addon

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
  exports.Set("Engine", moe_addon::Engine::Define(env));
  exports.Set("Generation", moe_addon::Generation::Define(env));
  exports.Set("packStepRecord", Napi::Function::New<moe_addon::PackStepRecord>(env, "packStepRecord"));
  exports.Set("describeModel", Napi::Function::New<moe_addon::DescribeModel>(env, "describeModel"));
  exports.Set("inspectHf", Napi::Function::New<moe_addon::InspectHf>(env, "inspectHf"));
  exports.Set("exportCheckpoint", Napi::Function::New<moe_addon::ExportCheckpoint>(env, "exportCheckpoint"));
  exports.Set("listBackends", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::String::New(info.Env(), moe_engine_list_backends());
  }, "listBackends"));
  exports.Set("apiVersion", Napi::Number::New(env, MOE_ENGINE_API_VERSION));
  return exports;
}

NODE_API_MODULE(moe_engine_addon, InitModule)
