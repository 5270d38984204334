#include "backend/cpu/convert_bf16.h"

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernel_builds.h"
#include "core/half.h"

namespace moe::cpu {

namespace {

constexpr int64_t kBlock = 8192;

void to_bf16_span(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace

void to_bf16(ThreadPool& tp, uint16_t* dst, const float* src, int64_t n) {
  auto span = pick_kernel(to_bf16_span_avx512, to_bf16_span_avx2, to_bf16_span);
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) { span(dst + i0, src + i0, i1 - i0); });
}

}  // namespace moe::cpu
