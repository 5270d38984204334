// Router: per-token softmax or sigmoid scores, plain or grouped top-k, with the Switch load-balancing loss
// and the ST-MoE z-loss. Loss reductions run over fixed 64-token blocks whose partial sums are combined in block order,
// so the losses are bit-identical whatever the thread count.
#include "backend/cpu/router.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/router_rows.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

constexpr int kBlock = 64;

void check_shapes(int N, int E, int K) {
  check(N >= 0 && E > 0 && K > 0 && K <= E,
        "router: need N >= 0 and 0 < K <= E, got N=" + std::to_string(N) + " E=" + std::to_string(E) +
            " K=" + std::to_string(K));
}

}  // namespace

void check_router_args(int N, int E, int K, const RouterSpec& spec) {
  check_shapes(N, E, K);
  const bool grouped = spec.selection != TopkSelection::Plain;
  if (grouped)
    check(spec.n_group > 0 && spec.n_group <= 64 && E % spec.n_group == 0 && spec.topk_group > 0 &&
              spec.topk_group <= spec.n_group &&
              (spec.selection != TopkSelection::NoAuxTc || E / spec.n_group >= 2),
          "router: grouped top-k needs n_group (at most 64) dividing E, 0 < topk_group <= n_group and, for noaux_tc, "
          "2 experts per group; got E=" + std::to_string(E) + " n_group=" + std::to_string(spec.n_group) +
              " topk_group=" + std::to_string(spec.topk_group));
}

RouterLosses router_forward(ThreadPool& tp, float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N,
                            int E, int K, const RouterSpec& spec, const int32_t* forced_topk) {
  check_router_args(N, E, K, spec);
  const bool grouped = spec.selection != TopkSelection::Plain;
  const bool sigmoid = spec.scoring == RouterScoring::Sigmoid;
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
        float lse = sigmoid ? router_rows::sigmoid_row(p, logits + n * E, E)
                            : router_rows::softmax_row(p, logits + n * E, E);
        thread_local std::vector<float> choice, group;
        thread_local std::vector<int32_t> gidx;
        choice.resize(E);
        group.resize(grouped ? spec.n_group : 0);
        gidx.resize(grouped ? spec.topk_group : 0);
        router_rows::choose_row(idx, w, p, forced_topk ? forced_topk + n * K : nullptr, choice.data(), group.data(),
                                gidx.data(), E, K, spec);
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

  const router_rows::BackwardCoefs c{f, aux_scale, z_scale, aux_coef, z_coef};
  const bool sigmoid = spec.scoring == RouterScoring::Sigmoid;
  tp.parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        thread_local std::vector<float> soft;
        soft.resize(E);
        for (int64_t n = n0; n < n1; ++n) {
          const float* g = dtopk_w ? dtopk_w + n * K : nullptr;
          if (sigmoid)
            router_rows::sigmoid_backward_row(dlogits + n * E, g, probs + n * E, topk_idx + n * K, topk_w + n * K,
                                              logits + n * E, E, K, spec, c, soft.data());
          else
            router_rows::softmax_backward_row(dlogits + n * E, g, probs + n * E, topk_idx + n * K, topk_w + n * K,
                                              logits + n * E, E, K, spec, c);
        }
      },
      16);
}

}  // namespace moe::cpu
