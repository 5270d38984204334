// Block-wise FP8 weights as DeepSeek-V3/R1 (and other "fp8" checkpoints) store them: a weight [..., R, C] in
// F8_E4M3 (OCP e4m3fn: 1 sign, 4 exponent bits biased by 7, 3 mantissa bits, no infinities, S.1111.111 = NaN)
// with a float companion <name>_scale_inv [..., ceil(R/br), ceil(C/bc)], one factor per br x bc block of
// quantization_config.weight_block_size; a partial block at the right or bottom edge has its own factor. The
// value is float32(fp8) * float32(scale_inv), one float32 product, as transformers' Fp8Dequantize
// (integrations/finegrained_fp8.py) and DeepSeek's weight_dequant compute it; decoding e4m3 is exact in float32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace moe {

float fp8_e4m3_value(uint8_t code);

// quantization_config's block size; rows == 0: the checkpoint declares no FP8 weights.
struct Fp8Blocks {
  int64_t rows = 0, cols = 0;
};

// The companion tensor holding the factors of an FP8 tensor.
std::string fp8_scale_name(const std::string& name);
// Whether ts stores p as F8_E4M3.
bool stored_as_fp8(const st::TensorSet& ts, const StoredPart& p);
// Checks an FP8 part from the headers only (its shape, its companion's presence, dtype and shape, the block size
// declared); fails naming the file and tensor.
void check_fp8_part(const st::TensorSet& ts, const StoredPart& p, const Fp8Blocks& blocks);
// Checks, then dequantises p into p.shape's float values; slab >= 0: only that leading index's [R, C] values (one
// expert of a fused part).
std::vector<float> read_fp8_part(const st::TensorSet& ts, const StoredPart& p, const Fp8Blocks& blocks,
                                 int64_t slab = -1);

}  // namespace moe
