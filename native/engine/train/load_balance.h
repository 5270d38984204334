// Auxiliary-loss-free load balancing (DeepSeek-V3): after each optimizer step, every MoE layer's selection bias
// (layers.L.moe.router.selection_bias, which only chooses experts, never weighs them) moves by ±rate towards
// balance: an expert that got fewer assignments than its layer's mean is favoured next step, one that got more
// is held back. No gradient is involved; the bias is an ordinary parameter for checkpoints.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

class Model;

// bias[e] += rate · sign(mean − load[e]), mean = Σ load / E; nothing moves at equality (compared exactly in
// integers: E·load[e] against Σ load).
void balance_bias_update(const int32_t* load, int E, double rate, float* bias);

// Applies balance_bias_update to every MoE layer of the model with its step's per-expert assignment counts
// (loads[i]: MoE layer i, as StepRecord::expert_tokens). The model must have selection biases.
void balance_selection_biases(Model& model, const std::vector<std::vector<int32_t>>& loads, double rate);

// Every MoE layer's selection bias, [MoE layer][expert] (empty when the model has none).
std::vector<std::vector<float>> read_selection_biases(Model& model);

}  // namespace moe
