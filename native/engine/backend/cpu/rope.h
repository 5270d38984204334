// Rotary position embedding over rows (RopeSpec, backend/types.h): the first spec.heads heads of each row are
// rotated pairwise by angle t·inv_freq[i] at position t, in the half-split (transformers' rotate_half) or the
// interleaved (DeepSeek) pair layout, with cos and sin times spec.scale; the rest of the row is copied.
#pragma once
#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

void rope_forward(ThreadPool& tp, float* out, const float* inp, int B, int T, const RopeSpec& spec);
// dinp += Rᵀ·dout on the rotated heads, dinp += dout on the rest.
void rope_backward(ThreadPool& tp, float* dinp, const float* dout, int B, int T, const RopeSpec& spec);

}  // namespace moe::cpu
