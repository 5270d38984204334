// Reading and writing the stored parts of a checkpoint that are not one contiguous block of one model tensor:
// fused expert tensors (a leading expert dimension, possibly transposed or with gate and up interleaved) and
// their MXFP4 storage. The element map is StoredPart's (train/checkpoint.h).
#pragma once
#include <vector>

#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace moe {

// One expert's slab of the stored part (leading index e: [A, B] or [B] values) -> its tensor, by p's element map;
// dst holds the arena's floats from float dst_begin on (the whole arena: 0; one expert's buffer: its range's begin).
void scatter_fused_expert(const StoredPart& p, int64_t e, const float* slab, float* dst, size_t dst_begin);
// The inverse: expert e's tensor (src holds the arena's floats from src_begin on) -> its slab of the stored part.
void gather_fused_expert(const StoredPart& p, int64_t e, const float* src, size_t src_begin, float* slab);

// The names a part may be stored under as MXFP4.
std::string mxfp4_blocks_name(const StoredPart& p);
std::string mxfp4_scales_name(const StoredPart& p);
// Whether ts holds p as MXFP4 (<name>_blocks and <name>_scales, and not <name> itself).
bool stored_as_mxfp4(const st::TensorSet& ts, const StoredPart& p);
// Checks the blocks/scales of p from the headers (U8, shapes [E, B, A/32, 16] and [E, B, A/32] for p.shape
// [E, A, B]); fails naming the tensor.
void check_mxfp4_part(const st::TensorSet& ts, const StoredPart& p);
// Decodes leading index e of p (checked) into its [A, B] values.
std::vector<float> read_mxfp4_slab(const st::TensorSet& ts, const StoredPart& p, int64_t e);

}  // namespace moe
