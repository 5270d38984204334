// AVX-512 build of the SwiGLU row kernels (see swiglu_kernels.h).
#include "backend/cpu/kernel_builds.h"
#include "backend/cpu/swiglu_kernels.h"

namespace moe::cpu {

void swiglu_forward_row_avx512(float* out, const float* gate, const float* up, int F) {
  swiglu_forward_row(out, gate, up, F);
}

void swiglu_backward_row_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                int F) {
  swiglu_backward_row(dgate, dup, dout, gate, up, F);
}

void swiglu_backward_write_row_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                      int F) {
  swiglu_backward_row<false>(dgate, dup, dout, gate, up, F);
}

}  // namespace moe::cpu
