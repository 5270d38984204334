#include "pipeline/memory_reuse.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"

namespace moe {
namespace {

void validate(const StreamSpeeds& w, const LayerSizes& l) {
  using Field = std::pair<double, const char*>;
  // Written so that NaN fails too.
  for (const auto& [v, field] : {Field{w.w_comp, "w_comp"}, Field{w.w_comm, "w_comm"}, Field{w.w_mem, "w_mem"}})
    check(v > 0 && std::isfinite(v), std::string("pipeline.") + field + ": must be a positive finite speed");
  for (const auto& [v, field] : {Field{w.sigma, "sigma"}, Field{w.mu_comp, "mu_comp"}, Field{w.mu_all, "mu_all"},
                                 Field{w.eta_all, "eta_all"}})
    check(v > 0 && v <= 1, std::string("pipeline.") + field + ": a slowdown factor must be in (0, 1], got " +
                               std::to_string(v));
  using Size = std::pair<int64_t, const char*>;
  for (const auto& [v, field] : {Size{l.B, "B"}, Size{l.M, "M"}, Size{l.H, "H"}, Size{l.E, "E"},
                                 Size{l.bytes_per_element, "bytes_per_element"}})
    check(v >= 1, std::string("pipeline.") + field + ": must be at least 1, got " + std::to_string(v));
  check(l.n >= 2 && l.n <= l.B, "pipeline.n: memory reuse needs 2 ≤ n ≤ B partitions, got n = " +
                                    std::to_string(l.n) + " for B = " + std::to_string(l.B));
}

// Table II's row for `s`, with T_M's copies scaled by r = H/M.
ReuseCost table_row(ReuseStrategy s, const StreamSpeeds& w, double r) {
  switch (s) {
    case ReuseStrategy::None: return {s, {2, 2, 0}, {4, 2, 0}, w.mu_comp, 0};
    case ReuseStrategy::S1: return {s, {2, 2, 1 + r}, {4, 2, 1 + r}, w.mu_all, w.eta_all};
    case ReuseStrategy::S2: return {s, {2, 2, r}, {4, 3, r}, w.mu_all, w.eta_all};
    case ReuseStrategy::S3: return {s, {2, 2, 1}, {5, 2, 1}, w.mu_all, w.eta_all};
    case ReuseStrategy::S4: return {s, {2, 2, 0}, {5, 3, 0}, w.mu_comp, 0};
  }
  fail("pipeline.strategy: unknown memory-reuse strategy");
}

// Eq. 10 for all B tokens (n micro-batches of B/n), in ms. Without copies (q3 = 0) there is no copy stream and no η.
double cost_ms(const std::array<double, 3>& q, const ReuseCost& row, const StreamSpeeds& w, const LayerSizes& l) {
  const double v_comp = 2.0 * double(l.B) * double(l.H) * double(l.M);        // eq. 7, FLOP
  const double v_comm = double(l.B) * double(l.M) * l.bytes_per_element;      // eq. 8, bytes
  const double v_mem = v_comm;                                                // eq. 9, bytes
  const double comp = q[0] * v_comp / (w.sigma * w.w_comp);
  const double comm = q[1] * v_comm / (row.mu * w.w_comm);
  const double mem = q[2] == 0 ? 0 : q[2] * v_mem / (row.eta * w.w_mem);
  return 1e3 * std::max({comp, comm, mem});
}

}  // namespace

std::array<ReuseCost, 5> reuse_costs(const StreamSpeeds& speeds, const LayerSizes& layer) {
  validate(speeds, layer);
  const double B = double(layer.B), M = double(layer.M), H = double(layer.H), n = layer.n;
  const double s = layer.bytes_per_element;
  const double model_states = 4 * (double(layer.E) * M + 2 * H * M) * s;         // eq. 1
  const double act_pipe = (4 * B * M + B * H) * s;                               // eq. 4, = M_buf^pipe
  const double delta = B * (2 * M * (n - 2) / n + H * (n - 1) / n) * s;         // eq. 5, = ΔM_buf
  std::array<ReuseCost, 5> out;
  for (int i = 0; i < 5; ++i) {
    ReuseCost c = table_row(ReuseStrategy(i), speeds, H / M);
    c.forward_ms = cost_ms(c.q_fw, c, speeds, layer);
    c.backward_ms = cost_ms(c.q_bw, c, speeds, layer);
    c.saved_bytes = c.strategy == ReuseStrategy::None ? 0 : 2 * delta;
    c.saving_ratio = c.saved_bytes / (model_states + 2 * act_pipe);            // eq. 6
    out[i] = c;
  }
  const double baseline = out[0].forward_ms + out[0].backward_ms;
  for (ReuseCost& c : out) c.extra_ms = c.forward_ms + c.backward_ms - baseline;
  return out;
}

ReuseStrategy choose_strategy(const StreamSpeeds& speeds, const LayerSizes& layer) {
  const std::array<ReuseCost, 5> costs = reuse_costs(speeds, layer);
  // min_element keeps the first of equals: Table II order.
  const auto best = std::min_element(costs.begin() + 1, costs.end(), [](const ReuseCost& a, const ReuseCost& b) {
    return a.forward_ms + a.backward_ms < b.forward_ms + b.backward_ms;
  });
  return best->strategy;
}

const char* reuse_strategy_name(ReuseStrategy s) {
  switch (s) {
    case ReuseStrategy::None: return "none";
    case ReuseStrategy::S1: return "S1";
    case ReuseStrategy::S2: return "S2";
    case ReuseStrategy::S3: return "S3";
    case ReuseStrategy::S4: return "S4";
  }
  return "unknown";
}

}  // namespace moe
