// MXFP4 (OCP microscaling FP4), as gpt-oss checkpoints store their expert weights: every byte of `blocks` holds
// two FP4 E2M1 codes, the low nibble first; each run of 32 values (16 bytes) shares one `scales` byte, a power
// of two biased by 127. value = fp4(code) · 2^(scale - 127), with fp4 codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// 8..15 their negatives. Decoding is exact in float32 (transformers' integrations/mxfp4.py, convert_moe_packed_tensors).
#pragma once
#include <cstdint>

namespace moe {

float fp4_e2m1_value(uint8_t code);  // code in [0, 16)
// blocks [rows, groups, 16] and scales [rows, groups] -> out [rows, groups · 32].
void mxfp4_decode(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t groups, float* out);

}  // namespace moe
