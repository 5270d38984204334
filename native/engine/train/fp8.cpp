#include "train/fp8.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace moe {

float fp8_e4m3_value(uint8_t code) {
  const int exponent = (code >> 3) & 15, mantissa = code & 7;
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);     // (1 + m/8) * 2^(e-7)
}

std::string fp8_scale_name(const std::string& name) { return name + "_scale_inv"; }

bool stored_as_fp8(const st::TensorSet& ts, const StoredPart& p) {
  const st::TensorSet::Entry* e = ts.find(p.name);
  return e && e->info->dtype == st::DType::F8_E4M3;
}

namespace {

std::vector<int64_t> scale_shape(const std::vector<int64_t>& shape, const Fp8Blocks& b) {
  std::vector<int64_t> s = shape;
  s[s.size() - 2] = (shape[shape.size() - 2] + b.rows - 1) / b.rows;
  s.back() = (shape.back() + b.cols - 1) / b.cols;
  return s;
}

}  // namespace

void check_fp8_part(const st::TensorSet& ts, const StoredPart& p, const Fp8Blocks& blocks) {
  const st::TensorSet::Entry* e = ts.find(p.name);
  const std::string where = e->reader->path() + ": tensor '" + p.name + "' is F8_E4M3";
  if (blocks.rows <= 0)
    fail(where + " but config.json has no quantization_config {\"quant_method\": \"fp8\", \"weight_block_size\": "
                 "[rows, cols]}, so its scale blocks are unknown");
  if (e->info->shape.size() < 2)
    fail(where + " with shape " + st::shape_str(e->info->shape) + "; block-wise FP8 needs a matrix");
  if (e->info->shape != p.shape)
    fail(e->reader->path() + ": tensor '" + p.name + "' has shape " + st::shape_str(e->info->shape) + ", expected " +
         st::shape_str(p.shape));
  const st::TensorSet::Entry* s = ts.find(fp8_scale_name(p.name));
  if (!s) fail(where + " but its scale tensor '" + fp8_scale_name(p.name) + "' is missing");
  const st::DType d = s->info->dtype;
  if (d != st::DType::F32 && d != st::DType::BF16 && d != st::DType::F16 && d != st::DType::F64)
    fail(s->reader->path() + ": tensor '" + s->info->name + "' has dtype " + st::dtype_name(d) +
         "; FP8 scales must be F32, BF16, F16 or F64");
  const std::vector<int64_t> want = scale_shape(p.shape, blocks);
  if (s->info->shape != want)
    fail(s->reader->path() + ": tensor '" + s->info->name + "' has shape " + st::shape_str(s->info->shape) +
         ", expected " + st::shape_str(want) + " for '" + p.name + "' " + st::shape_str(p.shape) + " in " +
         std::to_string(blocks.rows) + "x" + std::to_string(blocks.cols) + " blocks");
}

std::vector<float> read_fp8_part(const st::TensorSet& ts, const StoredPart& p, const Fp8Blocks& blocks,
                                 int64_t slab) {
  check_fp8_part(ts, p, blocks);
  const st::TensorSet::Entry* e = ts.find(p.name);
  const st::TensorSet::Entry* s = ts.find(fp8_scale_name(p.name));
  std::vector<float> scales(static_cast<size_t>(s->info->numel()));
  s->reader->read_f32(*s->info, scales.data(), s->info->shape);
  const int64_t R = p.shape[p.shape.size() - 2], C = p.shape.back();
  const int64_t SR = s->info->shape[s->info->shape.size() - 2], SC = s->info->shape.back();
  const int64_t lead = e->info->numel() / (R * C);
  if (slab >= lead) fail(ts.path() + ": tensor '" + p.name + "' has no leading index " + std::to_string(slab));
  const int64_t first = slab < 0 ? 0 : slab, last = slab < 0 ? lead : slab + 1;
  const uint8_t* q = e->reader->data(*e->info);
  std::vector<float> out(static_cast<size_t>((last - first) * R * C));
  for (int64_t m = first; m < last; ++m)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>((m * R + r) * C + c);
        out[i - static_cast<size_t>(first * R * C)] =
            fp8_e4m3_value(q[i]) * scales[static_cast<size_t>((m * SR + r / blocks.rows) * SC + c / blocks.cols)];
      }
  return out;
}

}  // namespace moe
