// AVX2 build of attention's row kernels (see attention_rows.h).
#include "backend/cpu/attention_rows.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

float attention_softmax_row_avx2(float* p, int lo, int visible, int nk, const float* sink) {
  return attention_softmax_row(p, lo, visible, nk, sink);
}

float attention_grad_row_avx2(float* p, float* ds, const float* dout, const float* out, int HS, float lse,
                                float scale, int lo, int visible, int nk) {
  return attention_grad_row(p, ds, dout, out, HS, lse, scale, lo, visible, nk);
}

}  // namespace moe::cpu
