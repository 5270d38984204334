// SwiGLU over gate_up rows [gate | up]; rows are independent, so parallel over N. The row kernels
// run with AVX-512 or AVX2 where the CPU has it.
#include "backend/cpu/swiglu.h"

#include <cstdint>

#include "backend/cpu/kernel_builds.h"
#include "backend/cpu/swiglu_kernels.h"

namespace moe::cpu {

void swiglu_forward(ThreadPool& tp, float* out, const float* gate_up, int N, int F) {
  auto row = pick_kernel(swiglu_forward_row_avx512, swiglu_forward_row_avx2, swiglu_forward_row);
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* g = gate_up + n * 2 * F;
      row(out + n * F, g, g + F, F);
    }
  });
}

void swiglu_backward(ThreadPool& tp, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                     bool write) {
  auto row = write ? pick_kernel(swiglu_backward_write_row_avx512, swiglu_backward_write_row_avx2,
                                 swiglu_backward_row<false>)
                   : pick_kernel(swiglu_backward_row_avx512, swiglu_backward_row_avx2, swiglu_backward_row<true>);
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* g = gate_up + n * 2 * F;
      float* dg = dgate_up + n * 2 * F;
      row(dg, dg + F, dout + n * F, g, g + F, F);
    }
  });
}

}  // namespace moe::cpu
