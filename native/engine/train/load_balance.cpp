#include "train/load_balance.h"

#include "core/error.h"
#include "model/model.h"

namespace moe {

void balance_bias_update(const int32_t* load, int E, double rate, float* bias) {
  int64_t total = 0;
  for (int e = 0; e < E; ++e) total += load[e];
  const float step = static_cast<float>(rate);
  for (int e = 0; e < E; ++e) {
    const int64_t scaled = static_cast<int64_t>(load[e]) * E;  // E·load vs Σ load: sign(mean − load) exactly
    if (scaled < total) bias[e] += step;
    else if (scaled > total) bias[e] -= step;
  }
}

namespace {

// The selection bias of each MoE layer in order, with its expert count.
template <class Fn>
void for_each_bias(Model& model, Fn&& fn) {
  const ModelConfig& cfg = model.config();
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (!cfg.is_moe_layer(l)) continue;
    float* bias = model.param_ptrs().layers[l].router_selection_bias;
    check(bias != nullptr, "load balancing: layer " + std::to_string(l) + " has no selection bias (model.selection_bias)");
    fn(cfg.moe_index(l), bias, cfg.experts_at(l));
  }
}

}  // namespace

void balance_selection_biases(Model& model, const std::vector<std::vector<int32_t>>& loads, double rate) {
  Backend& be = model.backend();
  be.synchronize();
  std::vector<float> host;
  for_each_bias(model, [&](int i, float* bias, int E) {
    check(static_cast<int>(loads.at(i).size()) == E, "load balancing: MoE layer " + std::to_string(i) +
                                                          " has " + std::to_string(E) + " experts but " +
                                                          std::to_string(loads[i].size()) + " loads");
    host.resize(E);
    be.copy(host.data(), bias, E * sizeof(float));
    balance_bias_update(loads[i].data(), E, rate, host.data());
    be.copy(bias, host.data(), E * sizeof(float));
  });
}

std::vector<std::vector<float>> read_selection_biases(Model& model) {
  std::vector<std::vector<float>> out;
  if (!model.config().selection_bias) return out;
  Backend& be = model.backend();
  be.synchronize();
  out.resize(model.moe_layer_count());
  for_each_bias(model, [&](int i, float* bias, int E) {
    out[i].resize(E);
    be.copy(out[i].data(), bias, E * sizeof(float));
  });
  return out;
}

}  // namespace moe
