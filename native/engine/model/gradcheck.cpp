#include "model/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "model/model.h"

namespace moe {
namespace {

// Routing decisions of every MoE layer, to detect perturbations that cross a top-k boundary; with clip_qkv also
// which q/k/v values were clamped (the objective has a kink where a value crosses the limit).
std::vector<int32_t> routing_signature(const Model& m, Backend& be) {
  std::vector<int32_t> sig;
  for (int i = 0; i < m.moe_layer_count(); ++i) {
    const DispatchPlan& p = m.moe_layer(i).plan();
    sig.insert(sig.end(), p.slot_token.begin(), p.slot_token.end());
    sig.insert(sig.end(), p.assign_slot.begin(), p.assign_slot.end());
  }
  const ModelConfig& c = m.config();
  if (c.clip_qkv > 0) {
    for (int l = 0; l < c.n_layers; ++l) {
      const AttentionActs& a = m.attention_acts(l);
      const DeviceBuffer& in = c.qk_norm != QkNorm::None ? a.qkv_norm : a.qkv;
      std::vector<float> v(in.bytes() / sizeof(float));
      be.copy(v.data(), in.f(), in.bytes());
      for (float x : v) sig.push_back(x < -c.clip_qkv ? -1 : x > c.clip_qkv ? 1 : 0);
    }
  }
  return sig;
}

}  // namespace

std::vector<TensorGradcheck> model_gradcheck(const ModelConfig& cfg, Backend& be, int B, int T, int samples, float h,
                                             uint64_t seed, bool skip_kinks, const FinetuneConfig& finetune) {
  Model model(cfg, be, ComputeDtype::F32, finetune);
  model.init(seed);
  for (const LoraAdapter& a : model.layout().adapters()) {
    const ParamTensor& b = model.layout().tensors()[a.b];
    std::vector<float> v(b.numel);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.2f * (2.0f * random_uniform(seed, 7 + b.offset, i) - 1.0f);
    be.copy(model.params() + b.offset, v.data(), v.size() * sizeof(float));
  }
  const int N = B * T;
  std::vector<int32_t> inputs(N), targets(N);
  for (int i = 0; i < N; ++i) {
    inputs[i] = static_cast<int32_t>(random_u64(seed, 1, i) % cfg.vocab_size);
    targets[i] = i % 7 == 3 ? -1 : static_cast<int32_t>(random_u64(seed, 2, i) % cfg.vocab_size);
  }
  auto objective = [&] {
    ForwardResult r = model.forward(inputs.data(), targets.data(), B, T);
    return r.loss + r.aux_loss;
  };

  model.zero_grads();
  const double base = objective();
  const std::vector<int32_t> base_routing = routing_signature(model, be);
  model.backward(1.0f);
  std::vector<float> params(model.num_params()), grads(model.num_grads());
  be.copy(params.data(), model.params(), params.size() * sizeof(float));
  be.copy(grads.data(), model.grads(), grads.size() * sizeof(float));

  std::vector<TensorGradcheck> report;
  const TrainableSet& trainable = model.trainable();
  for (size_t ti = 0; ti < model.layout().tensors().size(); ++ti) {
    const ParamTensor& t = model.layout().tensors()[ti];
    if (!trainable.trains(ti)) continue;  // frozen: no gradient to check
    TensorGradcheck tc;
    tc.name = t.name;
    const size_t n = std::min<size_t>(samples, t.numel);
    for (size_t s = 0; s < n; ++s) {
      const size_t i = t.offset + random_u64(seed, 3 + t.offset, s) % t.numel;
      const float saved = params[i];
      auto eval_at = [&](float v, bool* same_routing) {
        be.copy(model.params() + i, &v, sizeof(float));
        double o = objective();
        *same_routing = routing_signature(model, be) == base_routing;
        return o;
      };
      bool same_p = false, same_m = false;
      const double lp = eval_at(saved + h, &same_p), lm = eval_at(saved - h, &same_m);
      double half = 0.0;
      if (skip_kinks && same_p && same_m) {
        bool same_hp = false, same_hm = false;
        const double hp = eval_at(saved + h / 2, &same_hp), hm = eval_at(saved - h / 2, &same_hm);
        same_p = same_hp && same_hm;
        half = (hp - hm) / h;
      }
      be.copy(model.params() + i, &saved, sizeof(float));
      if (!same_p || !same_m) continue;
      const double numeric = (lp - lm) / (2.0 * h);
      auto rel = [](double a, double b) { return std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), 1e-3}); };
      // A kink right at the point leaves both central differences at the mean of the two slopes; the one-sided
      // differences then disagree.
      if (skip_kinks && (rel(numeric, half) > 5e-3 || rel((lp - base) / h, (base - lm) / h) > 2e-2)) continue;
      const double analytic = grads[i - t.offset + trainable.grad_offset(ti)];
      const double err = rel(numeric, analytic);
      tc.worst_rel_err = std::max(tc.worst_rel_err, err);
      ++tc.samples;
    }
    report.push_back(tc);
  }
  return report;
}

}  // namespace moe
