// Token (+ learned position) embedding. The backward scatters into rows that repeat whenever a
// token repeats, so it is parallel over channel blocks with tokens visited in order: race-free
// and bit-identical for any thread count.
#include "backend/cpu/embedding.h"

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {
constexpr int kChannelBlock = 64;
}  // namespace

void embedding_forward(ThreadPool& tp, float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
  tp.parallel_for((int64_t)B * T, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* e = wte + (int64_t)tokens[n] * C;
      float* o = out + n * C;
      if (wpe) {
        const float* p = wpe + (n % T) * C;
        for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
      } else {
        for (int c = 0; c < C; ++c) o[c] = e[c];
      }
    }
  });
}

void embedding_backward(ThreadPool& tp, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C) {
  int64_t N = (int64_t)B * T;
  for_each_block(tp, C, kChannelBlock, [=](int64_t c0, int64_t c1) {
    for (int64_t n = 0; n < N; ++n) {
      float* d = dwte + (int64_t)tokens[n] * C;
      const float* g = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
    if (!dwpe) return;
    for (int t = 0; t < T; ++t) {
      float* d = dwpe + (int64_t)t * C;
      for (int b = 0; b < B; ++b) {
        const float* g = dout + ((int64_t)b * T + t) * C;
        for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
      }
    }
  });
}

}  // namespace moe::cpu
