// Router: per-token softmax or sigmoid scores, plain or grouped top-k, with the Switch load-balancing loss
// and the ST-MoE z-loss. Loss reductions run over fixed 64-token blocks whose partial sums are combined in block order,
// so the losses are bit-identical whatever the thread count.
#include "backend/cpu/router.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace moe::cpu {
namespace {

constexpr int kBlock = 64;

void check_shapes(int N, int E, int K) {
  check(N >= 0 && E > 0 && K > 0 && K <= E,
        "router: need N >= 0 and 0 < K <= E, got N=" + std::to_string(N) + " E=" + std::to_string(E) +
            " K=" + std::to_string(K));
}

// Writes softmax(l) into p and returns logsumexp(l).
float softmax_row(float* p, const float* l, int E) {
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = std::max(mx, l[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    p[e] = std::exp(l[e] - mx);
    sum += p[e];
  }
  float inv = 1.0f / sum;
  for (int e = 0; e < E; ++e) p[e] *= inv;
  return mx + std::log(sum);
}

// Insertion into a descending list of K; the strict comparison keeps the lower index first on ties.
void topk_row(int32_t* idx, float* w, const float* p, int E, int K) {
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

float logsumexp_row(const float* l, int E) {
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = std::max(mx, l[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += std::exp(l[e] - mx);
  return mx + std::log(sum);
}

float sigmoid_row(float* p, const float* l, int E) {
  for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-l[e]));
  return logsumexp_row(l, E);
}

// The grouped selections: choice [E] is overwritten with the masked scores (0 outside the kept groups), then
// the K largest are taken. group [n_group] is scratch.
void grouped_topk_row(int32_t* idx, float* w, float* choice, float* group, int32_t* gidx, int E, int K,
                      const RouterSpec& spec) {
  const int G = spec.n_group, per = E / G;
  for (int g = 0; g < G; ++g) {
    const float* c = choice + g * per;
    if (spec.selection == TopkSelection::GroupLimited) {
      float mx = c[0];
      for (int i = 1; i < per; ++i) mx = std::max(mx, c[i]);
      group[g] = mx;
    } else {
      float top2[2];
      int32_t unused[2];
      topk_row(unused, top2, c, per, 2);
      group[g] = top2[0] + top2[1];
    }
  }
  float gw[64];
  topk_row(gidx, gw, group, G, spec.topk_group);
  for (int g = 0; g < G; ++g) {
    bool kept = false;
    for (int j = 0; j < spec.topk_group; ++j) kept |= gidx[j] == g;
    if (!kept)
      for (int i = 0; i < per; ++i) choice[g * per + i] = 0.0f;
  }
  topk_row(idx, w, choice, E, K);
}

// Sigmoid scores are independent per expert: ds_e/dl_e = s_e·(1 - s_e). The weights are the chosen scores u_k
// (times scale), or scale·u_k/S with S = Σ u: ∂/∂u_j = (scale·g_j - Σ_k g_k·w_k) / S. The z-loss is on the
// logits themselves (its softmax gradient), as with softmax scoring.
void sigmoid_router_backward(ThreadPool& tp, float* dlogits, const float* dtopk_w, const float* probs,
                             const int32_t* topk_idx, const float* topk_w, const float* logits, int N, int E, int K,
                             const RouterSpec& spec, const float* f, float aux_coef, float z_coef) {
  tp.parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        thread_local std::vector<float> soft;
        soft.resize(E);
        for (int64_t n = n0; n < n1; ++n) {
          const float* p = probs + n * E;
          const int32_t* idx = topk_idx + n * K;
          const float* w = topk_w + n * K;
          float* dl = dlogits + n * E;
          if (aux_coef != 0.0f)
            for (int e = 0; e < E; ++e) dl[e] += aux_coef * f[e] * p[e] * (1.0f - p[e]);
          if (z_coef != 0.0f) {
            const float lse = softmax_row(soft.data(), logits + n * E, E);
            for (int e = 0; e < E; ++e) dl[e] += z_coef * lse * soft[e];
          }
          if (!dtopk_w) continue;
          const float* g = dtopk_w + n * K;
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
      },
      16);
}

}  // namespace

RouterLosses router_forward(ThreadPool& tp, float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N,
                            int E, int K, const RouterSpec& spec, const int32_t* forced_topk) {
  check_shapes(N, E, K);
  const bool grouped = spec.selection != TopkSelection::Plain;
  if (grouped)
    check(spec.n_group > 0 && spec.n_group <= 64 && E % spec.n_group == 0 && spec.topk_group > 0 &&
              spec.topk_group <= spec.n_group &&
              (spec.selection != TopkSelection::NoAuxTc || E / spec.n_group >= 2),
          "router: grouped top-k needs n_group (at most 64) dividing E, 0 < topk_group <= n_group and, for noaux_tc, "
          "2 experts per group; got E=" + std::to_string(E) + " n_group=" + std::to_string(spec.n_group) +
              " topk_group=" + std::to_string(spec.topk_group));
  const bool sigmoid = spec.scoring == RouterScoring::Sigmoid;
  const float* bias = spec.selection_bias;
  if (N == 0) return {0.0f, 0.0f};
  const int blocks = (N + kBlock - 1) / kBlock;
  // Per block: Σ_n probs[n, e] (E), assignment counts (E), Σ_n lse_n² (1).
  const int stride = 2 * E + 1;
  thread_local std::vector<double> partial;
  partial.assign((size_t)blocks * stride, 0.0);
  double* part = partial.data();

  tp.parallel_for(blocks, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      double* psum = part + b * stride;
      double* cnt = psum + E;
      double& zsum = cnt[E];
      int64_t n1 = std::min<int64_t>(N, (b + 1) * kBlock);
      for (int64_t n = b * kBlock; n < n1; ++n) {
        float* p = probs + n * E;
        int32_t* idx = topk_idx + n * K;
        float* w = topk_w + n * K;
        float lse = sigmoid ? sigmoid_row(p, logits + n * E, E) : softmax_row(p, logits + n * E, E);
        if (forced_topk) {
          for (int k = 0; k < K; ++k) {
            idx[k] = forced_topk[n * K + k];
            w[k] = p[idx[k]];
          }
        } else if (grouped) {
          thread_local std::vector<float> choice, group;
          thread_local std::vector<int32_t> gidx;
          choice.resize(E);
          group.resize(spec.n_group);
          gidx.resize(spec.topk_group);
          for (int e = 0; e < E; ++e) choice[e] = bias ? p[e] + bias[e] : p[e];
          grouped_topk_row(idx, w, choice.data(), group.data(), gidx.data(), E, K, spec);
          for (int k = 0; k < K; ++k) w[k] = p[idx[k]];
        } else if (bias) {
          thread_local std::vector<float> biased;
          biased.resize(E);
          for (int e = 0; e < E; ++e) biased[e] = p[e] + bias[e];
          topk_row(idx, w, biased.data(), E, K);
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
        for (int e = 0; e < E; ++e) psum[e] += p[e];
        for (int k = 0; k < K; ++k) cnt[idx[k]] += 1.0;
        zsum += (double)lse * lse;
      }
    }
  });

  for (int b = 1; b < blocks; ++b)
    for (int i = 0; i < stride; ++i) part[i] += part[(size_t)b * stride + i];
  double aux = 0.0;
  for (int e = 0; e < E; ++e) aux += (part[E + e] / ((double)N * K)) * (part[e] / N);
  return {(float)(E * aux), (float)(part[2 * E] / N)};
}

void router_backward(ThreadPool& tp, float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                     const float* topk_w, const float* logits, int N, int E, int K, const RouterSpec& spec,
                     float aux_scale, float z_scale) {
  check_shapes(N, E, K);
  const bool renormalize = spec.renormalize;
  // topk_w holds the weights times spec.scale: the gradient of Σ g·topk_w is scale times the unscaled one.
  const float scale = spec.scale;
  if (!dlogits || N == 0) return;
  // f_e, the routing shares, are a constant of the routing decision: counted once for all tokens.
  thread_local std::vector<float> share;
  share.assign(E, 0.0f);
  if (aux_scale != 0.0f) {
    thread_local std::vector<int64_t> counts;
    counts.assign(E, 0);
    for (int64_t i = 0; i < (int64_t)N * K; ++i) counts[topk_idx[i]]++;
    for (int e = 0; e < E; ++e) share[e] = (float)((double)counts[e] / ((double)N * K));
  }
  const float* f = share.data();
  const float aux_coef = aux_scale * (float)E / (float)N;
  const float z_coef = z_scale * 2.0f / (float)N;

  if (spec.scoring == RouterScoring::Sigmoid) {
    sigmoid_router_backward(tp, dlogits, dtopk_w, probs, topk_idx, topk_w, logits, N, E, K, spec, f,
                            aux_scale != 0.0f ? aux_coef : 0.0f, z_scale != 0.0f ? z_coef : 0.0f);
    return;
  }
  tp.parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          const float* p = probs + n * E;
          const int32_t* idx = topk_idx + n * K;
          const float* w = topk_w + n * K;
          float* dl = dlogits + n * E;
          // Dense part: dl_e += p_e · (aux_coef·f_e + base), base collecting every term that is the same for all e.
          double base = 0.0;
          if (aux_scale != 0.0f) {
            double fp = 0.0;
            for (int e = 0; e < E; ++e) fp += (double)f[e] * p[e];
            base -= aux_coef * fp;
          }
          if (z_scale != 0.0f) base += (double)z_coef * logsumexp_row(logits + n * E, E);
          double gw = 0.0;  // Σ_k dtopk_w · topk_w
          if (dtopk_w) {
            const float* g = dtopk_w + n * K;
            for (int k = 0; k < K; ++k) gw += (double)g[k] * w[k];
            // Without renormalisation topk_w = p, so d(Σ g·p)/dl_e = p_e·(g_e - Σ g·w) reaches every logit.
            if (!renormalize) base -= gw;
            else gw /= scale;
          }
          const float basef = (float)base;
          for (int e = 0; e < E; ++e) dl[e] += p[e] * (aux_coef * f[e] + basef);
          if (dtopk_w) {
            const float* g = dtopk_w + n * K;
            if (renormalize) {
              // topk_w is the softmax over the selected logits alone: only those receive gradient.
              for (int k = 0; k < K; ++k) dl[idx[k]] += w[k] * (float)(g[k] - gw);
            } else {
              for (int k = 0; k < K; ++k) dl[idx[k]] += p[idx[k]] * g[k] * scale;
            }
          }
        }
      },
      16);
}

}  // namespace moe::cpu
