// Packs one moe_step_record into the byte layout main/host/engine/step-record.ts decodes
// (little-endian, version 1):
//   f64[11]: version, step, loss, aux_loss, lr, grad_norm, tokens, step_ms, forward_ms, backward_ms, optimizer_ms
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[sum of experts] tokens per expert
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "moe_engine.h"

namespace moe_addon {

static_assert(std::endian::native == std::endian::little, "the step record is little-endian; so is the host");

inline constexpr double kStepRecordVersion = 1;
inline constexpr size_t kStepRecordScalars = 11;

inline std::vector<uint8_t> pack_step_record(const moe_step_record& r) {
  const int32_t layers = r.n_moe_layers;
  const int64_t experts = std::accumulate(r.experts_per_layer, r.experts_per_layer + layers, int64_t{0});
  std::vector<uint8_t> buf(kStepRecordScalars * 8 + 4 + 4 * static_cast<size_t>(layers) + 4 * static_cast<size_t>(experts));
  const double scalars[kStepRecordScalars] = {kStepRecordVersion,      static_cast<double>(r.step), r.loss,
                                              r.aux_loss,              r.lr,
                                              r.grad_norm,             static_cast<double>(r.tokens),
                                              r.step_ms,               r.forward_ms,
                                              r.backward_ms,           r.optimizer_ms};
  uint8_t* out = buf.data();
  std::memcpy(out, scalars, sizeof scalars);
  out += sizeof scalars;
  std::memcpy(out, &layers, 4);
  out += 4;
  if (layers > 0) std::memcpy(out, r.experts_per_layer, 4 * static_cast<size_t>(layers));
  out += 4 * static_cast<size_t>(layers);
  if (experts > 0) std::memcpy(out, r.expert_tokens, 4 * static_cast<size_t>(experts));
  return buf;
}

}  // namespace moe_addon
