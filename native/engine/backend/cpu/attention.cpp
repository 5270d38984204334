// Causal grouped-query attention, blocked over query tiles of kTile rows. A tile's scores against
// all keys it may see (0 .. its last row) fit in per-thread scratch (kTile × T floats), so the
// softmax is exact in one pass (no online rescaling) and both products run on sgemm.
// sgemm is called with a single-thread pool from inside pool workers: the parallelism is over
// (batch, head) here, which keeps every reduction order fixed and the output thread-count
// independent. The per-row softmax work (attention_rows.h) runs with AVX-512 or AVX2 where available.
// A sliding window narrows a tile's keys to [k0, q0+mq) with k0 its first row's first visible key; rows mask
// the rest. Without window and sinks every call is the plain causal kernel's, operation for operation.
#include "backend/cpu/attention.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/attention_rows.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

namespace {

constexpr int kTile = 64;

// Per-thread scratch, grown on demand and kept across calls so steady-state steps never allocate.
float* thread_scratch(int slot, size_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buf = buffers[slot];
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

ThreadPool& serial_pool() {
  thread_local ThreadPool pool(1);
  return pool;
}

struct Layout {
  int T, NH, NKV, HS, row, out_row, group;
  int64_t q(int b, int t, int h) const { return ((int64_t)b * T + t) * row + (int64_t)h * HS; }
  int64_t k(int b, int t, int g) const { return ((int64_t)b * T + t) * row + (int64_t)(NH + g) * HS; }
  int64_t v(int b, int t, int g) const { return ((int64_t)b * T + t) * row + (int64_t)(NH + NKV + g) * HS; }
  int64_t o(int b, int t, int h) const { return ((int64_t)b * T + t) * out_row + (int64_t)h * HS; }
};

Layout make_layout(int T, int NH, int NKV, int HS) {
  return {T, NH, NKV, HS, (NH + 2 * NKV) * HS, NH * HS, NH / NKV};
}

// Scaled scores of query rows [q0, q0+mq) against keys [k0, k0+nk): s[i, j] = q_i·k_(k0+j) / √HS.
void tile_scores(float* s, const float* qkv, const Layout& L, int b, int h, int q0, int mq, int k0, int nk,
                 float scale) {
  sgemm(serial_pool(), false, true, mq, nk, L.HS, scale, qkv + L.q(b, q0, h), L.row, qkv + L.k(b, k0, h / L.group),
        L.row, 0.0f, s, nk);
}

// The keys a tile's rows may see: [k0, q0+mq). Row t's own window starts at row_lo(t) (relative to k0).
int tile_k0(int q0, int window) { return window > 0 && q0 - window + 1 > 0 ? q0 - window + 1 : 0; }
int row_lo(int t, int k0, int window) { return window > 0 && t - window + 1 > k0 ? t - window + 1 - k0 : 0; }

}  // namespace

void attention_forward(ThreadPool& tp, float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV,
                       int HS, const AttentionSpec& spec) {
  const Layout L = make_layout(T, NH, NKV, HS);
  const float scale = 1.0f / std::sqrt((float)HS);
  auto softmax_row = pick_kernel(attention_softmax_row_avx512, attention_softmax_row_avx2, attention_softmax_row);
  const Isa isa = current_isa();
  tp.parallel_for((int64_t)B * NH, [&](int64_t t0, int64_t t1, int) {
    const IsaScope same_kernels(isa);  // the tiles' sgemm calls pick their kernels on this worker
    float* p = thread_scratch(0, (size_t)kTile * T);
    for (int64_t task = t0; task < t1; ++task) {
      int b = (int)(task / NH), h = (int)(task % NH), g = h / L.group;
      float* lse_bh = lse + task * T;
      const float* sink = spec.sinks ? spec.sinks + h : nullptr;
      for (int q0 = 0; q0 < T; q0 += kTile) {
        int mq = q0 + kTile < T ? kTile : T - q0;
        int k0 = tile_k0(q0, spec.window), nk = q0 + mq - k0;
        tile_scores(p, qkv, L, b, h, q0, mq, k0, nk, scale);
        for (int i = 0; i < mq; ++i)
          lse_bh[q0 + i] =
              softmax_row(p + (int64_t)i * nk, row_lo(q0 + i, k0, spec.window), q0 + i + 1 - k0, nk, sink);
        sgemm(serial_pool(), false, false, mq, HS, nk, 1.0f, p, nk, qkv + L.v(b, k0, g), L.row, 0.0f,
              out + L.o(b, q0, h), L.out_row);
      }
    }
  });
}

// Per tile: P = exp(S - lse) (masked entries 0), dP = dO·Vᵀ, dS = P∘(dP - D)/√HS with
// D = rowsum(dO∘O); then dQ += dS·K, dK += dSᵀ·Q, dV += Pᵀ·dO, accumulated straight into dqkv.
// One task owns a (batch, kv head) pair, so its dK/dV rows are written by no one else, and the
// query heads of the group are visited in ascending order. A sink's gradient is Σ_rows -exp(sink - lse)·D,
// summed per (batch, head) in the task and then over batches in order, so it too is thread-count independent.
void attention_backward(ThreadPool& tp, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec) {
  const Layout L = make_layout(T, NH, NKV, HS);
  const float scale = 1.0f / std::sqrt((float)HS);
  auto grad_row = pick_kernel(attention_grad_row_avx512, attention_grad_row_avx2, attention_grad_row);
  const Isa isa = current_isa();
  std::vector<double> dsink_bh(spec.sinks ? (size_t)B * NH : 0, 0.0);
  tp.parallel_for((int64_t)B * NKV, [&](int64_t t0, int64_t t1, int) {
    const IsaScope same_kernels(isa);  // the tiles' sgemm calls pick their kernels on this worker
    float* p = thread_scratch(0, (size_t)kTile * T);
    float* ds = thread_scratch(1, (size_t)kTile * T);
    ThreadPool& serial = serial_pool();
    for (int64_t task = t0; task < t1; ++task) {
      int b = (int)(task / NKV), g = (int)(task % NKV);
      for (int h = g * L.group; h < (g + 1) * L.group; ++h) {
        const float* lse_bh = lse + ((int64_t)b * NH + h) * T;
        double dsink = 0.0;
        for (int q0 = 0; q0 < T; q0 += kTile) {
          int mq = q0 + kTile < T ? kTile : T - q0;
          int k0 = tile_k0(q0, spec.window), nk = q0 + mq - k0;
          const float* do_tile = dout + L.o(b, q0, h);
          tile_scores(p, qkv, L, b, h, q0, mq, k0, nk, scale);
          sgemm(serial, false, true, mq, nk, HS, 1.0f, do_tile, L.out_row, qkv + L.v(b, k0, g), L.row, 0.0f, ds, nk);
          for (int i = 0; i < mq; ++i) {
            float D = grad_row(p + (int64_t)i * nk, ds + (int64_t)i * nk, do_tile + (int64_t)i * L.out_row,
                               out + L.o(b, q0 + i, h), HS, lse_bh[q0 + i], scale, row_lo(q0 + i, k0, spec.window),
                               q0 + i + 1 - k0, nk);
            if (spec.sinks) dsink -= (double)std::exp(spec.sinks[h] - lse_bh[q0 + i]) * D;
          }
          sgemm(serial, false, false, mq, HS, nk, 1.0f, ds, nk, qkv + L.k(b, k0, g), L.row, 1.0f,
                dqkv + L.q(b, q0, h), L.row);
          sgemm(serial, true, false, nk, HS, mq, 1.0f, ds, nk, qkv + L.q(b, q0, h), L.row, 1.0f,
                dqkv + L.k(b, k0, g), L.row);
          sgemm(serial, true, false, nk, HS, mq, 1.0f, p, nk, do_tile, L.out_row, 1.0f, dqkv + L.v(b, k0, g), L.row);
        }
        if (spec.sinks) dsink_bh[(size_t)b * NH + h] = dsink;
      }
    }
  });
  if (spec.sinks && spec.dsinks)  // null dsinks: the sinks are frozen
    for (int h = 0; h < NH; ++h) {
      double sum = 0.0;
      for (int b = 0; b < B; ++b) sum += dsink_bh[(size_t)b * NH + h];
      spec.dsinks[h] += (float)sum;
    }
}

}  // namespace moe::cpu
