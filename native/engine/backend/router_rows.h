// The router's per-token algorithm (cpu/router.h states the semantics), written once for the host and the CUDA
// kernels: scores, top-k selection, the combine weights and the per-token gradient. Each backend decides only how
// tokens are spread over its workers and how the loss sums are reduced. Float math goes through expf / logf,
// which are what std::exp / std::log compute for a float on the host.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/types.h"
#include "core/host_device.h"

namespace moe::router_rows {

// Writes softmax(l) into p and returns logsumexp(l).
MOE_HOST_DEVICE inline float softmax_row(float* p, const float* l, int E) {
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = mx < l[e] ? l[e] : mx;
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    p[e] = expf(l[e] - mx);
    sum += p[e];
  }
  float inv = 1.0f / sum;
  for (int e = 0; e < E; ++e) p[e] *= inv;
  return mx + logf(sum);
}

MOE_HOST_DEVICE inline float logsumexp_row(const float* l, int E) {
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = mx < l[e] ? l[e] : mx;
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += expf(l[e] - mx);
  return mx + logf(sum);
}

MOE_HOST_DEVICE inline float sigmoid_row(float* p, const float* l, int E) {
  for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + expf(-l[e]));
  return logsumexp_row(l, E);
}

// Insertion into a descending list of K; the strict comparison keeps the lower index first on ties.
MOE_HOST_DEVICE inline void topk_row(int32_t* idx, float* w, const float* p, int E, int K) {
  int filled = 0;
  for (int e = 0; e < E; ++e) {
    float v = p[e];
    if (filled == K && !(v > w[K - 1])) continue;
    int pos = filled < K ? filled++ : K - 1;
    while (pos > 0 && v > w[pos - 1]) {
      w[pos] = w[pos - 1];
      idx[pos] = idx[pos - 1];
      --pos;
    }
    w[pos] = v;
    idx[pos] = e;
  }
}

constexpr int kMaxGroups = 64;

// The grouped selections: choice [E] is overwritten with the masked scores (0 outside the kept groups), then
// the K largest are taken. group [n_group] and gidx [topk_group] are scratch.
MOE_HOST_DEVICE inline void grouped_topk_row(int32_t* idx, float* w, float* choice, float* group, int32_t* gidx, int E,
                                             int K, const RouterSpec& spec) {
  const int G = spec.n_group, per = E / G;
  for (int g = 0; g < G; ++g) {
    const float* c = choice + g * per;
    if (spec.selection == TopkSelection::GroupLimited) {
      float mx = c[0];
      for (int i = 1; i < per; ++i) mx = mx < c[i] ? c[i] : mx;
      group[g] = mx;
    } else {
      float top2[2];
      int32_t unused[2];
      topk_row(unused, top2, c, per, 2);
      group[g] = top2[0] + top2[1];
    }
  }
  float gw[kMaxGroups];
  topk_row(gidx, gw, group, G, spec.topk_group);
  for (int g = 0; g < G; ++g) {
    bool kept = false;
    for (int j = 0; j < spec.topk_group; ++j) kept |= gidx[j] == g;
    if (!kept)
      for (int i = 0; i < per; ++i) choice[g * per + i] = 0.0f;
  }
  topk_row(idx, w, choice, E, K);
}

// One token's K experts and weights from its scores p [E]: forced [K] (or null) taken as they are, else the top-k
// of p (+ selection bias; grouped as the spec says); then renormalised and scaled. choice [E], group [n_group] and
// gidx [topk_group] are scratch, used only for a bias or a grouped selection.
MOE_HOST_DEVICE inline void choose_row(int32_t* idx, float* w, const float* p, const int32_t* forced, float* choice,
                                       float* group, int32_t* gidx, int E, int K, const RouterSpec& spec) {
  const float* bias = spec.selection_bias;
  if (forced) {
    for (int k = 0; k < K; ++k) {
      idx[k] = forced[k];
      w[k] = p[idx[k]];
    }
  } else if (spec.selection != TopkSelection::Plain) {
    for (int e = 0; e < E; ++e) choice[e] = bias ? p[e] + bias[e] : p[e];
    grouped_topk_row(idx, w, choice, group, gidx, E, K, spec);
    for (int k = 0; k < K; ++k) w[k] = p[idx[k]];
  } else if (bias) {
    for (int e = 0; e < E; ++e) choice[e] = p[e] + bias[e];
    topk_row(idx, w, choice, E, K);
    for (int k = 0; k < K; ++k) w[k] = p[idx[k]];
  } else {
    topk_row(idx, w, p, E, K);
  }
  if (spec.renormalize) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += w[k];
    for (int k = 0; k < K; ++k) w[k] /= s;
  }
  if (spec.scale != 1.0f)
    for (int k = 0; k < K; ++k) w[k] *= spec.scale;
}

// The gradient's constants: the routing shares f [E] (a constant of the routing decision) and the losses' scales.
struct BackwardCoefs {
  const float* f;
  float aux_scale, z_scale;
  float aux_coef;  // aux_scale · E / N
  float z_coef;    // z_scale · 2 / N
};

// Softmax scoring, one token: dl [E] += ∂/∂logits (cpu/router.h). g = dtopk_w [K] or null.
MOE_HOST_DEVICE inline void softmax_backward_row(float* dl, const float* g, const float* p, const int32_t* idx,
                                                 const float* w, const float* l, int E, int K, const RouterSpec& spec,
                                                 const BackwardCoefs& c) {
  // topk_w holds the weights times spec.scale: the gradient of Σ g·topk_w is scale times the unscaled one.
  const float scale = spec.scale;
  const float* f = c.f;
  // Dense part: dl_e += p_e · (aux_coef·f_e + base), base collecting every term that is the same for all e.
  double base = 0.0;
  if (c.aux_scale != 0.0f) {
    double fp = 0.0;
    for (int e = 0; e < E; ++e) fp += (double)f[e] * p[e];
    base -= c.aux_coef * fp;
  }
  if (c.z_scale != 0.0f) base += (double)c.z_coef * logsumexp_row(l, E);
  double gw = 0.0;  // Σ_k dtopk_w · topk_w
  if (g) {
    for (int k = 0; k < K; ++k) gw += (double)g[k] * w[k];
    // Without renormalisation topk_w = p, so d(Σ g·p)/dl_e = p_e·(g_e - Σ g·w) reaches every logit.
    if (!spec.renormalize) base -= gw;
    else gw /= scale;
  }
  const float basef = (float)base;
  for (int e = 0; e < E; ++e) dl[e] += p[e] * (c.aux_coef * f[e] + basef);
  if (!g) return;
  if (spec.renormalize) {
    // topk_w is the softmax over the selected logits alone: only those receive gradient.
    for (int k = 0; k < K; ++k) dl[idx[k]] += w[k] * (float)(g[k] - gw);
  } else {
    for (int k = 0; k < K; ++k) dl[idx[k]] += p[idx[k]] * g[k] * scale;
  }
}

// Sigmoid scoring, one token. Sigmoid scores are independent per expert: ds_e/dl_e = s_e·(1 - s_e). The weights are
// the chosen scores u_k (times scale), or scale·u_k/S with S = Σ u: ∂/∂u_j = (scale·g_j - Σ_k g_k·w_k) / S. The
// z-loss is on the logits themselves (its softmax gradient), as with softmax scoring. soft [E] is scratch.
MOE_HOST_DEVICE inline void sigmoid_backward_row(float* dl, const float* g, const float* p, const int32_t* idx,
                                                 const float* w, const float* l, int E, int K, const RouterSpec& spec,
                                                 const BackwardCoefs& c, float* soft) {
  const float aux_coef = c.aux_scale != 0.0f ? c.aux_coef : 0.0f, z_coef = c.z_scale != 0.0f ? c.z_coef : 0.0f;
  if (aux_coef != 0.0f)
    for (int e = 0; e < E; ++e) dl[e] += aux_coef * c.f[e] * p[e] * (1.0f - p[e]);
  if (z_coef != 0.0f) {
    const float lse = softmax_row(soft, l, E);
    for (int e = 0; e < E; ++e) dl[e] += z_coef * lse * soft[e];
  }
  if (!g) return;
  if (spec.renormalize) {
    double sum = 0.0, gw = 0.0;
    for (int k = 0; k < K; ++k) sum += p[idx[k]], gw += (double)g[k] * w[k];
    for (int k = 0; k < K; ++k) {
      const float u = p[idx[k]];
      dl[idx[k]] += (float)(((double)spec.scale * g[k] - gw) / sum) * u * (1.0f - u);
    }
  } else {
    for (int k = 0; k < K; ++k) {
      const float u = p[idx[k]];
      dl[idx[k]] += spec.scale * g[k] * u * (1.0f - u);
    }
  }
}

}  // namespace moe::router_rows
