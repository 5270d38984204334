#include "train/stored_part.h"

#include <cstring>

#include "core/error.h"
#include "train/mxfp4.h"

namespace moe {
namespace {

// Calls f(index in e's slab, arena index) for every element of leading index e of a fused part.
template <class F>
void for_each_element(const StoredPart& p, int64_t e, F f) {
  const int64_t A = p.shape.size() == 3 ? p.shape[1] : 1;
  const int64_t B = p.shape.back();
  const size_t base = p.experts[e]->offset + p.offset;
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      f(static_cast<size_t>(a * B + b),
        base + static_cast<size_t>(a * p.stride_a + (b / p.group) * p.stride_b + (b % p.group) * p.stride_group));
}

}  // namespace

void scatter_fused_expert(const StoredPart& p, int64_t e, const float* slab, float* dst, size_t dst_begin) {
  for_each_element(p, e, [&](size_t s, size_t a) { dst[a - dst_begin] = slab[s]; });
}

void gather_fused_expert(const StoredPart& p, int64_t e, const float* src, size_t src_begin, float* slab) {
  for_each_element(p, e, [&](size_t s, size_t a) { slab[s] = src[a - src_begin]; });
}

std::string mxfp4_blocks_name(const StoredPart& p) { return p.name + "_blocks"; }
std::string mxfp4_scales_name(const StoredPart& p) { return p.name + "_scales"; }

bool stored_as_mxfp4(const st::TensorSet& ts, const StoredPart& p) {
  return p.mxfp4 && !ts.find(p.name) && ts.find(mxfp4_blocks_name(p)) && ts.find(mxfp4_scales_name(p));
}

void check_mxfp4_part(const st::TensorSet& ts, const StoredPart& p) {
  const st::TensorSet::Entry* blocks = ts.find(mxfp4_blocks_name(p));
  const st::TensorSet::Entry* scales = ts.find(mxfp4_scales_name(p));
  if (p.shape.size() != 3 || p.shape[1] % 32 != 0)
    fail(blocks->reader->path() + ": tensor '" + blocks->info->name + "': MXFP4 storage of a tensor of shape " +
         st::shape_str(p.shape) + " is not supported (needs [E, A, B] with A a multiple of 32)");
  const int64_t E = p.shape[0], A = p.shape[1], B = p.shape[2], G = A / 32;
  const std::vector<int64_t> want_blocks{E, B, G, 16}, want_scales{E, B, G};
  for (const auto& [entry, want] : {std::pair{blocks, want_blocks}, std::pair{scales, want_scales}}) {
    if (entry->info->dtype != st::DType::U8)
      fail(entry->reader->path() + ": tensor '" + entry->info->name + "' has dtype " +
           st::dtype_name(entry->info->dtype) + "; MXFP4 blocks and scales are U8");
    if (entry->info->shape != want)
      fail(entry->reader->path() + ": tensor '" + entry->info->name + "' has shape " +
           st::shape_str(entry->info->shape) + ", expected " + st::shape_str(want) + " for '" + p.name + "' " +
           st::shape_str(p.shape));
  }
}

// transformers decodes blocks [E, B, A/32, 16] to [E, B, A] and transposes the last two dimensions, so the
// stored values are the HF parameter [E, A, B] transposed.
std::vector<float> read_mxfp4_slab(const st::TensorSet& ts, const StoredPart& p, int64_t e) {
  check_mxfp4_part(ts, p);
  const st::TensorSet::Entry* blocks = ts.find(mxfp4_blocks_name(p));
  const st::TensorSet::Entry* scales = ts.find(mxfp4_scales_name(p));
  const int64_t A = p.shape[1], B = p.shape[2], G = A / 32;
  const size_t nb = static_cast<size_t>(B * G * 16), ns = static_cast<size_t>(B * G);
  std::vector<float> decoded(static_cast<size_t>(B * A)), out(decoded.size());
  mxfp4_decode(blocks->reader->data(*blocks->info) + e * nb, scales->reader->data(*scales->info) + e * ns, B, G,
               decoded.data());
  for (int64_t i = 0; i < B; ++i)
    for (int64_t a = 0; a < A; ++a) out[a * B + i] = decoded[i * A + a];
  return out;
}

}  // namespace moe
