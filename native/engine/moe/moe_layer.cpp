#include "moe/moe_layer.h"

#include <algorithm>
#include <cmath>

#include "devices/device_experts.h"

namespace moe {

MoeShape MoeShape::from_config(const ModelConfig& cfg, int layer) {
  MoeShape s;
  const ModelFeatures f = model_features(cfg);
  const FfnActivation act = f.activation;
  s.C = cfg.d_model;
  s.E = cfg.experts_at(layer);
  s.K = cfg.top_k;
  const float alpha = static_cast<float>(cfg.swiglu_alpha), limit = static_cast<float>(cfg.swiglu_limit);
  s.expert = {cfg.d_model, cfg.expert_d_ff, act, alpha, limit};
  s.shared = {cfg.d_model, f.shared_expert ? cfg.shared_expert_d_ff : 0, act, alpha, limit};
  s.residual = {cfg.d_model, f.residual_mlp ? cfg.d_ff : 0, act, alpha, limit};
  s.router.scoring = f.router_scoring;
  s.router.selection = f.topk_selection;
  s.router.n_group = cfg.router.n_group;
  s.router.topk_group = cfg.router.topk_group;
  s.router.renormalize = cfg.renormalize;
  s.router.scale = static_cast<float>(cfg.routed_scaling);
  s.shared_gate = f.shared_expert_gate;
  s.capacity_factor = cfg.capacity_factor;
  return s;
}

RouterSpec MoeLayer::router_spec(const LayerParams& p) const {
  RouterSpec spec = s_.router;
  spec.selection_bias = p.router_selection_bias;
  return spec;
}

int MoeShape::capacity(int N) const {
  if (capacity_factor <= 0) return 0;
  return static_cast<int>(std::ceil(capacity_factor * N * K / E));
}

std::vector<int> MoeLayer::experts_with_rows(bool reverse) const {
  std::vector<int> order;
  for (int i = 0; i < s_.E; ++i) {
    const int e = reverse ? s_.E - 1 - i : i;
    if (rows(e) > 0) order.push_back(e);
  }
  return order;
}

void MoeLayer::reserve(Backend& be, int N, BackwardScratch& scratch) {
  const int C = s_.C, E = s_.E, K = s_.K;
  const int capacity = s_.capacity(N);
  const size_t S = capacity ? (size_t)E * capacity : (size_t)N * K;
  const size_t max_rows = capacity ? capacity : N;
  reserve_floats(be, logits_, (size_t)N * E);
  reserve_floats(be, probs_, (size_t)N * E);
  topk_idx_.reserve(be, sizeof(int32_t) * N * K);
  reserve_floats(be, topk_w_, (size_t)N * K);
  reserve_floats(be, xs_, S * C);
  if (!devices_) {  // on devices, the devices hold the hidden activations
    reserve_floats(be, h_, S * s_.expert.in_rows());
    reserve_floats(be, act_, S * s_.expert.F);
  }
  reserve_floats(be, ys_, S * C);
  for (const FfnShape* fs : {&s_.shared, &s_.residual}) {
    if (fs->F == 0) continue;
    reserve_floats(be, scratch.c, (size_t)N * fs->in_rows());
    reserve_floats(be, scratch.d, (size_t)N * fs->F);
  }
  if (s_.shared.F > 0) {
    reserve_floats(be, shared_h_, (size_t)N * s_.shared.in_rows());
    reserve_floats(be, shared_act_, (size_t)N * s_.shared.F);
    reserve_floats(be, shared_out_, (size_t)N * C);
    if (s_.shared_gate) {
      reserve_floats(be, gate_logit_, N);
      reserve_floats(be, gated_shared_, (size_t)N * C);
      reserve_floats(be, scratch.e, (size_t)N * C + N);
    }
  }
  if (s_.residual.F > 0) {
    reserve_floats(be, residual_h_, (size_t)N * s_.residual.in_rows());
    reserve_floats(be, residual_act_, (size_t)N * s_.residual.F);
    reserve_floats(be, residual_out_, (size_t)N * C);
  }
  reserve_floats(be, scratch.a, S * C + (size_t)N * K);
  reserve_floats(be, scratch.b, std::max(S * C, (size_t)N * E));
  reserve_floats(be, scratch.c, max_rows * s_.expert.in_rows());
  reserve_floats(be, scratch.d, max_rows * s_.expert.F);
}

size_t MoeLayer::buffer_bytes() const {
  size_t total = 0;
  for (const DeviceBuffer* b : {&logits_, &probs_, &topk_idx_, &topk_w_, &xs_, &h_, &act_, &ys_, &shared_h_,
                                &shared_act_, &shared_out_, &gate_logit_, &gated_shared_, &residual_h_,
                                &residual_act_, &residual_out_})
    total += b->bytes();
  return total;
}

// Consecutive experts of `order` cut into runs computed together: at most `max_experts` each and, where
// max_rows > 0, at most max_rows rows (backward's scratch), though an expert alone may have up to max_rows rows.
std::vector<std::vector<int>> MoeLayer::runs(const std::vector<int>& order, int max_experts, size_t max_rows) const {
  std::vector<std::vector<int>> out;
  size_t rows_in_run = 0;
  for (int e : order) {
    const size_t r = rows(e);
    if (out.empty() || (int)out.back().size() >= max_experts || (max_rows > 0 && rows_in_run + r > max_rows)) {
      out.emplace_back();
      rows_in_run = 0;
    }
    out.back().push_back(e);
    rows_in_run += r;
  }
  return out;
}

// The routed experts on the layer's own backend through the ExpertAccess, as many at once as it lets hold.
void MoeLayer::forward_experts(Backend& be, ExpertAccess& experts, const float* x) {
  const int C = s_.C;
  const size_t S = plan_.total_slots();
  reserve_floats(be, h_, S * s_.expert.in_rows());
  reserve_floats(be, act_, S * s_.expert.F);
  // Announce the order before permuting, so an offloading access uploads the first expert meanwhile.
  const std::vector<int> order = experts_with_rows(false);
  experts.plan(layer_, ExpertPass::Forward, order);
  be.permute_forward(xs_.f(), x, plan_, C);
  for (const std::vector<int>& run : runs(order, experts.max_held(), 0)) {
    std::vector<FfnSegment> segs;
    for (int e : run) segs.push_back({plan_.offsets[e], rows(e), experts.weights(layer_, e), {}});
    ffn_forward(be, segs, s_.expert, ys_.f(), xs_.f(), h_.f(), act_.f());
    for (int e : run) experts.done_forward(layer_, e);
  }
}

RouterLosses MoeLayer::forward(Backend& be, const LayerParams& p, ExpertAccess& experts, float* y, const float* x,
                               int N, const int32_t* forced_topk) {
  const int C = s_.C, E = s_.E, K = s_.K;
  reserve_floats(be, logits_, (size_t)N * E);
  reserve_floats(be, probs_, (size_t)N * E);
  topk_idx_.reserve(be, sizeof(int32_t) * N * K);
  reserve_floats(be, topk_w_, (size_t)N * K);

  be.matmul_forward(logits_.f(), x, p.router_w, p.router_b, N, C, E);
  RouterLosses losses =
      be.router_forward(probs_.f(), topk_idx_.i32(), topk_w_.f(), logits_.f(), N, E, K, router_spec(p), forced_topk);
  be.dispatch_plan(plan_, topk_idx_.i32(), N, E, K, s_.capacity(N));

  const size_t S = plan_.total_slots();
  reserve_floats(be, xs_, S * C);
  reserve_floats(be, ys_, S * C);
  if (devices_) {
    be.permute_forward(xs_.f(), x, plan_, C);
    std::vector<int32_t> expert_rows(E);
    for (int e = 0; e < E; ++e) expert_rows[e] = rows(e);
    devices_->forward(experts, plan_.offsets, expert_rows, xs_.f(), ys_.f(), N);
  } else {
    forward_experts(be, experts, x);
  }
  be.combine_forward(y, ys_.f(), topk_w_.f(), plan_, C);

  if (s_.shared.F > 0) {
    reserve_floats(be, shared_h_, (size_t)N * s_.shared.in_rows());
    reserve_floats(be, shared_act_, (size_t)N * s_.shared.F);
    reserve_floats(be, shared_out_, (size_t)N * C);
    ffn_forward(be, p.shared, s_.shared, shared_out_.f(), x, shared_h_.f(), shared_act_.f(), N);
    if (s_.shared_gate) {
      reserve_floats(be, gate_logit_, N);
      be.matmul_forward(gate_logit_.f(), x, p.shared_gate_w, nullptr, N, C, 1);
      reserve_floats(be, gated_shared_, (size_t)N * C);
      be.sigmoid_gate_forward(gated_shared_.f(), gate_logit_.f(), shared_out_.f(), N, C);
      be.accumulate(y, gated_shared_.f(), (int64_t)N * C);
    } else {
      be.accumulate(y, shared_out_.f(), (int64_t)N * C);
    }
  }
  if (s_.residual.F > 0) {
    reserve_floats(be, residual_h_, (size_t)N * s_.residual.in_rows());
    reserve_floats(be, residual_act_, (size_t)N * s_.residual.F);
    reserve_floats(be, residual_out_, (size_t)N * C);
    ffn_forward(be, p.residual, s_.residual, residual_out_.f(), x, residual_h_.f(), residual_act_.f(), N);
    be.accumulate(y, residual_out_.f(), (int64_t)N * C);
  }
  return losses;
}

void MoeLayer::backward(Backend& be, const LayerParams& p, const LayerParams& g, ExpertAccess& experts, float* dx,
                        const float* dy, const float* x, int N, float aux_scale, float z_scale,
                        BackwardScratch& scratch) {
  const int C = s_.C, E = s_.E, K = s_.K;
  const size_t S = plan_.total_slots();

  // Dense side paths first: they read only x and dy.
  auto dense_backward = [&](const FfnParams& w, const FfnParams& gw, const FfnShape& fs, const float* d_out,
                            const float* h, const float* act) {
    reserve_floats(be, scratch.c, (size_t)N * fs.in_rows());
    reserve_floats(be, scratch.d, (size_t)N * fs.F);
    ffn_backward(be, w, gw, fs, dx, d_out, x, h, act, scratch.c.f(), scratch.d.f(), N);
  };
  if (s_.residual.F > 0) dense_backward(p.residual, g.residual, s_.residual, dy, residual_h_.f(), residual_act_.f());
  if (s_.shared.F > 0) {
    if (s_.shared_gate) {
      reserve_floats(be, scratch.e, (size_t)N * C + N);
      float* dshared = scratch.e.f();
      float* dgate = dshared + (size_t)N * C;
      be.zero(scratch.e.f(), scratch.e.bytes());
      be.sigmoid_gate_backward(dgate, dshared, dy, gate_logit_.f(), shared_out_.f(), N, C);
      be.matmul_backward(dx, g.shared_gate_w, nullptr, dgate, x, p.shared_gate_w, N, C, 1);
      dense_backward(p.shared, g.shared, s_.shared, dshared, shared_h_.f(), shared_act_.f());
    } else {
      dense_backward(p.shared, g.shared, s_.shared, dy, shared_h_.f(), shared_act_.f());
    }
  }

  // Routed experts: combine -> experts (runs of segments, in reverse) -> permute. Announced first, so uploads
  // overlap the combine.
  const std::vector<int> order = experts_with_rows(true);
  if (!devices_) experts.plan(layer_, ExpertPass::Backward, order);
  reserve_floats(be, scratch.a, S * C + (size_t)N * K);
  be.zero(scratch.a.f(), scratch.a.bytes());
  float* dys = scratch.a.f();
  float* dtopk_w = dys + S * C;
  be.combine_backward(dys, dtopk_w, dy, ys_.f(), topk_w_.f(), plan_, C);

  reserve_floats(be, scratch.b, S * C);
  be.zero(scratch.b.f(), scratch.b.bytes());
  float* dxs = scratch.b.f();
  if (devices_) {
    devices_->backward(be, experts, dys, xs_.f(), dxs);
  } else {
    const size_t max_rows = plan_.capacity ? plan_.capacity : N;
    const int IR = s_.expert.in_rows(), F = s_.expert.F;
    reserve_floats(be, scratch.c, max_rows * IR);
    reserve_floats(be, scratch.d, max_rows * F);
    for (const std::vector<int>& run : runs(order, experts.max_held(), max_rows)) {
      // Rows counted from the run's first, so the scratch's max_rows rows cover it.
      int64_t first = plan_.offsets[run.front()];
      for (int e : run) first = std::min<int64_t>(first, plan_.offsets[e]);
      std::vector<FfnSegment> segs;
      for (int e : run) {
        const FfnParams w = experts.weights(layer_, e);
        segs.push_back({plan_.offsets[e] - first, rows(e), w, experts.grads(layer_, e)});
      }
      ffn_backward(be, segs, s_.expert, dxs + first * C, dys + first * C, xs_.f() + first * C, h_.f() + first * IR,
                   act_.f() + first * F, scratch.c.f(), scratch.d.f());
      for (int e : run) experts.done_backward(layer_, e);
    }
  }
  be.permute_backward(dx, dxs, plan_, C);

  // Router: gradients from the combine weights plus the aux and z regularisers.
  reserve_floats(be, scratch.b, (size_t)N * E);
  be.zero(scratch.b.f(), (size_t)N * E * sizeof(float));
  float* dlogits = scratch.b.f();
  be.router_backward(dlogits, dtopk_w, probs_.f(), topk_idx_.i32(), topk_w_.f(), logits_.f(), N, E, K, router_spec(p),
                     aux_scale, z_scale);
  be.matmul_backward(dx, g.router_w, g.router_b, dlogits, x, p.router_w, N, C, E);
}

}  // namespace moe
