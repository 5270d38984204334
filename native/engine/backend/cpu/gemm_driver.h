// What the fp32 and bf16 sgemm drivers (gemm.cpp, gemm_bf16.cpp) share: the CPU features their kernel families
// need, the kernel pick under the calling thread's ISA choice, argument checks, the K blocking and the split of C
// into per-thread regions. Blocking sizes, packing and cost weights stay with each driver.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cpu/isa.h"
#include "core/error.h"
#include "core/threadpool.h"

namespace moe::cpu::gemm_driver {

constexpr double kSerialMacs = 1 << 18;  // below this, waking the pool costs more than it saves

struct CpuFeatures {
  bool avx512;       // F, BW, VL and DQ: the fp32 kernels' instructions
  bool avx512_bf16;  // F, BW, VL and BF16: vdpbf16ps and the bf16 packers
  bool avx2_fma;
};

inline const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    __builtin_cpu_init();
    const bool base = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
    return CpuFeatures{base && __builtin_cpu_supports("avx512dq"), base && __builtin_cpu_supports("avx512bf16"),
                       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")};
  }();
  return f;
}

// The family a call runs: `native` (the fastest this CPU has, picked once) unless the calling thread asks for the
// portable reference.
template <class Kernels>
const Kernels& for_calling_thread(const Kernels& native, const Kernels& portable) {
  return current_isa() == Isa::Native ? native : portable;
}

// One call's shape, scalars, A and C, and its K block. B's element type is each driver's own: it adds B's
// pointer(s) and finds op(B)[k][j] at b_offset(k, j).
struct Problem {
  bool ta, tb;
  int M, N, K, kc;
  float alpha, beta;
  const float* A;
  int64_t lda, ldb;
  float* C;
  int64_t ldc;

  const float* a_at(int i, int k) const { return ta ? A + k * lda + i : A + i * lda + k; }
  int64_t b_offset(int k, int j) const { return tb ? j * ldb + k : k * ldb + j; }
};

// Checks sizes and strides (errors name `op`) and does the calls with nothing to multiply: returns false when
// nothing is left to do (M or N zero; K zero, where C is only scaled by beta).
inline bool prepare(const char* op, bool trans_a, bool trans_b, int M, int N, int K, int lda, int ldb, float beta,
                    float* C, int ldc) {
  const std::string name = op;
  check(M >= 0 && N >= 0 && K >= 0, name + ": negative size M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                        " K=" + std::to_string(K));
  if (M == 0 || N == 0) return false;
  check(ldc >= N, name + ": ldc=" + std::to_string(ldc) + " is smaller than N=" + std::to_string(N));
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return false;
  }
  check(lda >= (trans_a ? M : K), name + ": lda=" + std::to_string(lda) + " is smaller than op(A)'s row length");
  check(ldb >= (trans_b ? K : N), name + ": ldb=" + std::to_string(ldb) + " is smaller than op(B)'s row length");
  return true;
}

// kc depends on K only (so every C element sees the same reduction order): the smallest number of blocks of at
// most kc_max, sized evenly, and rounded up to whole k pairs when `pairs` so no pair straddles two blocks.
inline int block_k(int K, int kc_max, bool pairs) {
  const int blocks = (K + kc_max - 1) / kc_max;
  const int kc = (K + blocks - 1) / blocks;
  return pairs ? kc + (kc & 1) : kc;
}

// Runs region(m0, m1, n0, n1) over disjoint regions of C, never splitting K: the whole of C on the calling thread
// for small problems, else a tm x tn grid (tm·tn = threads) minimising cost(mt, nt, tn), the slowest thread's rows
// and columns (columns whole nr-wide panels). Region edges in N fall on panel boundaries.
template <class Cost, class Region>
void run_regions(ThreadPool& tp, int M, int N, int K, int nr, Cost&& cost, Region&& region) {
  int threads = tp.threads();
  if (static_cast<double>(M) * N * K < kSerialMacs) threads = 1;
  if (threads == 1) return region(0, M, 0, N);

  int tm = 1, tn = threads;
  double best = -1;
  for (int a = 1; a <= threads; ++a) {
    if (threads % a) continue;
    const int b = threads / a;
    const double mt = (M + a - 1) / a;
    const double nt = ((N + nr - 1) / nr + b - 1) / b * nr;
    const double c = cost(mt, nt, b);
    if (best < 0 || c < best) best = c, tm = a, tn = b;
  }
  const int n_units = (N + nr - 1) / nr;
  tp.run_on_all([&](int w) {
    if (w >= tm * tn) return;
    const int bi = w / tn, bj = w % tn;
    const int m0 = static_cast<int>(int64_t{M} * bi / tm), m1 = static_cast<int>(int64_t{M} * (bi + 1) / tm);
    const int n0 = std::min(N, n_units * bj / tn * nr), n1 = std::min(N, n_units * (bj + 1) / tn * nr);
    region(m0, m1, n0, n1);
  });
}

}  // namespace moe::cpu::gemm_driver
