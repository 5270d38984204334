// Linear layer on sgemm. The bias gradient is reduced over tokens in ascending order per column
// (parallel over columns only), so it is bit-identical for any thread count.
#include "backend/cpu/matmul.h"

#include <cstdint>

#include "backend/cpu/gemm.h"

namespace moe::cpu {
namespace {
constexpr int kColumnBlock = 64;
}  // namespace

namespace {

// Seeds y with the bias, for sgemm to add x·wᵀ onto (beta = 1): one pass over y instead of two.
void seed_bias(ThreadPool& tp, float* y, const float* b, int N, int O) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n)
      for (int o = 0; o < O; ++o) y[n * O + o] = b[o];
  });
}

}  // namespace

void matmul_forward(ThreadPool& tp, float* y, const float* x, const float* w, const float* b, int N, int I, int O) {
  if (b) seed_bias(tp, y, b, N, O);
  sgemm(tp, false, true, N, O, I, 1.0f, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_forward_packed(ThreadPool& tp, float* y, const float* x, const float* packed, const float* b, int N, int I,
                           int O) {
  if (b) seed_bias(tp, y, b, N, O);
  sgemm_packed_bt(tp, N, O, I, 1.0f, x, I, packed, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward(ThreadPool& tp, float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int N, int I, int O, bool write_dx) {
  if (dx) sgemm(tp, false, false, N, I, O, 1.0f, dy, O, w, I, write_dx ? 0.0f : 1.0f, dx, I);
  if (dw) sgemm(tp, true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
  if (db) {
    int blocks = (O + kColumnBlock - 1) / kColumnBlock;
    tp.parallel_for(blocks, [=](int64_t b0, int64_t b1, int) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        int o0 = (int)blk * kColumnBlock, o1 = o0 + kColumnBlock < O ? o0 + kColumnBlock : O;
        float acc[kColumnBlock] = {};
        for (int64_t n = 0; n < N; ++n)
          for (int o = o0; o < o1; ++o) acc[o - o0] += dy[n * O + o];
        for (int o = o0; o < o1; ++o) db[o] += acc[o - o0];
      }
    });
  }
}

}  // namespace moe::cpu
