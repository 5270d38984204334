// fp32 -> bf16 conversion of whole arrays (the bf16 weight copies of mixed-precision training), rounding to
// nearest even exactly as moe::f32_to_bf16, in fixed blocks so the result never depends on the thread count.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// dst[i] = bf16 bits of src[i], i in [0, n).
void to_bf16(ThreadPool& tp, uint16_t* dst, const float* src, int64_t n);

}  // namespace moe::cpu
