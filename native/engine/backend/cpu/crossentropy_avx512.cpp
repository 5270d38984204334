// AVX-512 build of the cross-entropy row kernels (see crossentropy_rows.h).
#include "backend/cpu/crossentropy_rows.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

float crossentropy_row_lse_avx512(const float* x, int V) { return crossentropy_row_lse(x, V); }

void crossentropy_row_grad_avx512(float* dx, const float* x, int target, float scale, int V) {
  crossentropy_row_grad(dx, x, target, scale, V);
}

}  // namespace moe::cpu
