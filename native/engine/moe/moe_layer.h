// One MoE feed-forward layer: router -> softmax/top-k -> tokens sorted by expert into contiguous
// segments -> expert FFN per segment -> weighted combine, plus the optional shared expert (with its
// sigmoid gate) and PR-MoE residual MLP. Backward mirrors it. Owns the activations it saves.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/ffn.h"
#include "model/params.h"
#include "offload/expert_access.h"

namespace moe {
class DeviceExperts;
}

namespace moe {

struct MoeShape {
  int C = 0, E = 0, K = 0;
  FfnShape expert, shared, residual;  // shared.F / residual.F == 0 when absent
  RouterSpec router;  // selection_bias is the layer's parameter, bound per call
  bool shared_gate = false;
  double capacity_factor = 0;  // 0: dropless

  static MoeShape from_config(const ModelConfig& cfg, int layer);
  int capacity(int N) const;  // 0 when dropless
};

// Scratch shared by all layers during backward (sized to the largest user).
struct BackwardScratch {
  DeviceBuffer a, b, c, d, e;
};

class MoeLayer {
 public:
  // layer: the model layer index, which names this layer's experts to the ExpertAccess.
  MoeLayer(const MoeShape& shape, int layer) : s_(shape), layer_(layer) {}

  // Routed experts are reached only through `experts` (it decides where their weights and gradients live).
  // forced_topk [N,K] (may be null): experts chosen per token instead of the router's top-k (routing skew).
  RouterLosses forward(Backend& be, const LayerParams& p, ExpertAccess& experts, float* y, const float* x, int N,
                       const int32_t* forced_topk = nullptr);
  void backward(Backend& be, const LayerParams& p, const LayerParams& grads, ExpertAccess& experts, float* dx,
                const float* dy, const float* x, int N, float aux_scale, float z_scale, BackwardScratch& scratch);

  // Allocates every buffer forward and backward of N tokens will use (the row count is fixed by N: N·K
  // dropless, E × capacity with one), so the activation footprint is known before the first step.
  void reserve(Backend& be, int N, BackwardScratch& scratch);
  size_t buffer_bytes() const;

  // Routed experts then compute on the run's devices (placement, pipelining) instead of here. Not owned.
  void run_experts_on(DeviceExperts* devices) { devices_ = devices; }

  const DispatchPlan& plan() const { return plan_; }
  // The last forward's router output in the backend's memory: probabilities [N, E] and the chosen experts
  // [N, K] (the router's choice, before any capacity drop). Read by measurements that run forward only.
  const float* router_probs() const { return probs_.f(); }
  const int32_t* router_topk() const { return topk_idx_.i32(); }
  const MoeShape& shape() const { return s_; }
  // Rows an expert computes: its tokens (dropless) or the full padded segment (capacity).
  int rows(int e) const { return plan_.capacity ? plan_.capacity : plan_.counts[e]; }

 private:
  std::vector<int> experts_with_rows(bool reverse) const;
  std::vector<std::vector<int>> runs(const std::vector<int>& order, int max_experts, size_t max_rows) const;
  RouterSpec router_spec(const LayerParams& p) const;
  void forward_experts(Backend& be, ExpertAccess& experts, const float* x);

  MoeShape s_;
  int layer_;
  DeviceExperts* devices_ = nullptr;
  DispatchPlan plan_;
  DeviceBuffer logits_, probs_, topk_idx_, topk_w_, xs_, h_, act_, ys_;
  DeviceBuffer shared_h_, shared_act_, shared_out_, gate_logit_, gated_shared_;
  DeviceBuffer residual_h_, residual_act_, residual_out_;
};

}  // namespace moe
