// GELU (tanh approximation) over fixed 4096-element blocks, so every element takes the same code
// path whatever the thread count; the span kernels run with AVX-512 or AVX2 where the CPU has it.
#include "backend/cpu/gelu.h"

#include "backend/cpu/gelu_kernels.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

namespace {
constexpr int64_t kBlock = 4096;
}  // namespace

void gelu_forward(ThreadPool& tp, float* out, const float* inp, int64_t n) {
  auto span = pick_kernel(gelu_forward_span_avx512, gelu_forward_span_avx2, gelu_forward_span);
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) { span(out + i0, inp + i0, i1 - i0); });
}

void gelu_backward(ThreadPool& tp, float* dinp, const float* inp, const float* dout, int64_t n) {
  auto span = pick_kernel(gelu_backward_span_avx512, gelu_backward_span_avx2, gelu_backward_span);
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) { span(dinp + i0, inp + i0, dout + i0, i1 - i0); });
}

}  // namespace moe::cpu
