// AVX-512 build of the GELU span kernels (see gelu_kernels.h).
#include "backend/cpu/gelu_kernels.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

void gelu_forward_span_avx512(float* out, const float* inp, int64_t n) { gelu_forward_span(out, inp, n); }

void gelu_backward_span_avx512(float* dinp, const float* inp, const float* dout, int64_t n) {
  gelu_backward_span(dinp, inp, dout, n);
}

}  // namespace moe::cpu
