// Rotary position embedding on a fused qkv row [(NH + 2·NKV)·HS]: q heads, then k heads, then v heads.
// Head vectors of the token at position t are rotated pairwise (i, i + HS/2) by angle t·θ^(-2i/HS)
// (the Hugging Face "rotate_half" convention); v is copied unchanged.
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void rope_forward(ThreadPool& tp, float* out, const float* inp, int B, int T, int NH, int NKV, int HS, float theta);
// dinp += Rᵀ·dout on q and k, dinp += dout on v.
void rope_backward(ThreadPool& tp, float* dinp, const float* dout, int B, int T, int NH, int NKV, int HS, float theta);

}  // namespace moe::cpu
