// Residual add and gradient accumulation: streamed in fixed 4096-element blocks so every element
// goes through the same (vectorised) code path whatever the thread count.
#include "backend/cpu/elementwise.h"

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {
constexpr int64_t kBlock = 4096;
}  // namespace

void add_forward(ThreadPool& tp, float* out, const float* a, const float* b, int64_t n) {
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

void accumulate(ThreadPool& tp, float* dst, const float* src, int64_t n) {
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
  });
}

}  // namespace moe::cpu
