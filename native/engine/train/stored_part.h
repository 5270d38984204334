// Reading and writing the stored parts of a checkpoint that are not one contiguous block of one model tensor:
// fused expert tensors (a leading expert dimension, possibly transposed or with gate and up interleaved) and
// their MXFP4 storage. The element map is StoredPart's (train/checkpoint.h).
#pragma once
#include <vector>

#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace moe {

// stored [numel of p.shape] -> the arena (the model's flat parameters), by p's element map.
void scatter_fused(const StoredPart& p, const float* stored, float* arena);
// The arena -> stored, the inverse of scatter_fused.
void gather_fused(const StoredPart& p, const float* arena, float* stored);

// The names a part may be stored under as MXFP4.
std::string mxfp4_blocks_name(const StoredPart& p);
std::string mxfp4_scales_name(const StoredPart& p);
// Whether ts holds p as MXFP4 (<name>_blocks and <name>_scales, and not <name> itself).
bool stored_as_mxfp4(const st::TensorSet& ts, const StoredPart& p);
// Checks the blocks/scales of p (U8, shapes [E, B, A/32, 16] and [E, B, A/32] for p.shape [E, A, B]) and decodes
// them into p.shape's values; fails naming the tensor.
std::vector<float> read_mxfp4_part(const st::TensorSet& ts, const StoredPart& p);

}  // namespace moe
