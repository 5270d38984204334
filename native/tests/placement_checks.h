// Shared helpers of the placement tests: configs, routing skews, makespans, brute-forced optima and the
// invariants every placement must keep.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "placement/placement.h"
#include "testing.h"

namespace placement_test {

using moe::ExpertCostModel;
using moe::ExpertPiece;
using moe::Placement;
using moe::PlacementConfig;
using moe::PlacementPolicy;

inline PlacementConfig config(PlacementPolicy policy, int devices) {
  PlacementConfig cfg;
  cfg.policy = policy;
  cfg.devices = devices;
  return cfg;
}

// ES-MoE's greedy as it was before splitting: every expert whole.
inline PlacementConfig whole_greedy(int devices) {
  PlacementConfig cfg = config(PlacementPolicy::Greedy, devices);
  cfg.greedy_split = false;
  return cfg;
}

inline int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t(0)); }

// Splits `total` rows in proportion to `weights`, largest remainders first (ties: lower expert), so the counts
// sum to `total` exactly.
inline std::vector<int32_t> apportion(const std::vector<double>& weights, int64_t total) {
  const double w = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int32_t> counts(weights.size());
  std::vector<double> remainder(weights.size());
  int64_t given = 0;
  for (size_t e = 0; e < weights.size(); ++e) {
    const double exact = weights[e] / w * double(total);
    counts[e] = int32_t(std::floor(exact));
    remainder[e] = exact - counts[e];
    given += counts[e];
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (int64_t i = 0; i < total - given; ++i) ++counts[order[i]];
  return counts;
}

// Expected rows per expert of N tokens × top-K under the engine's routing-skew distributions: "hot" sends
// `hot_fraction` of the tokens to expert 0 and spreads the other rows evenly; "zipf" weighs expert e by
// 1 / (e + 1)^s; "uniform" weighs all equally.
inline std::vector<int32_t> hot_rows(int E, int N, int K, double hot_fraction) {
  const int32_t hot = int32_t(std::lround(hot_fraction * N));
  std::vector<int32_t> rest = apportion(std::vector<double>(E - 1, 1.0), int64_t(N) * K - hot);
  rest.insert(rest.begin(), hot);
  return rest;
}
inline std::vector<int32_t> zipf_rows(int E, int N, int K, double s) {
  std::vector<double> w(E);
  for (int e = 0; e < E; ++e) w[e] = 1.0 / std::pow(e + 1.0, s);
  return apportion(w, int64_t(N) * K);
}
inline std::vector<int32_t> uniform_rows(int E, int N, int K) {
  return apportion(std::vector<double>(E, 1.0), int64_t(N) * K);
}

// Random rows per expert: some zero, some tiny, one expert sometimes far hotter than the rest.
inline std::vector<int32_t> random_rows(uint64_t instance, int E, int max_rows) {
  std::vector<int32_t> rows(E);
  for (int e = 0; e < E; ++e) {
    const uint64_t r = moe::random_u64(7, instance, e);
    rows[e] = r % 5 == 0 ? 0 : int32_t((r >> 8) % uint64_t(max_rows + 1));
  }
  if (moe::random_u64(7, instance, E) % 3 == 0) rows[moe::random_u64(7, instance, E + 1) % E] += 20 * max_rows;
  return rows;
}

inline double expert_cost(int32_t rows, const ExpertCostModel& cost) {
  return std::max(cost.upload_ms_per_expert, rows * cost.compute_ms_per_token);
}

// The greedy's objective: the largest sum of piece costs on a device (a piece costs as an expert of its rows).
inline double makespan(const Placement& p, int D, const ExpertCostModel& cost) {
  std::vector<double> device(D, 0.0);
  for (const ExpertPiece& piece : p.pieces) device[piece.device] += expert_cost(piece.count, cost);
  return *std::max_element(device.begin(), device.end());
}

// The minimum makespan over all assignments of the placement's own pieces (the same cuts) to D devices, by
// exhaustive search with pruning. one_per_device: only the assignments with at most one piece of an expert per
// device (the constraint the greedy keeps); otherwise any assignment.
inline double optimal_piece_makespan(const Placement& p, int D, const ExpertCostModel& cost, bool one_per_device) {
  struct Search {
    std::vector<int> expert;
    std::vector<double> job;
    std::vector<double> load;
    std::vector<int> device;
    bool one_per_device;
    double best;
    void assign(size_t i, double worst) {
      if (worst >= best) return;
      if (i == job.size()) {
        best = worst;
        return;
      }
      for (size_t d = 0; d < load.size(); ++d) {
        bool taken = false;
        for (size_t j = 0; j < i && one_per_device; ++j) taken |= expert[j] == expert[i] && device[j] == int(d);
        if (taken) continue;
        const bool empty = load[d] == 0;
        load[d] += job[i];
        device[i] = int(d);
        assign(i + 1, std::max(worst, load[d]));
        load[d] -= job[i];
        if (empty) break;  // the empty devices are interchangeable: trying the first is enough
      }
    }
  };
  std::vector<const ExpertPiece*> pieces;
  for (const ExpertPiece& piece : p.pieces) pieces.push_back(&piece);
  std::stable_sort(pieces.begin(), pieces.end(), [&](const ExpertPiece* a, const ExpertPiece* b) {
    return expert_cost(a->count, cost) > expert_cost(b->count, cost);  // the big jobs first prune the most
  });
  Search search{{}, {}, std::vector<double>(D, 0.0), std::vector<int>(pieces.size()), one_per_device, INFINITY};
  for (const ExpertPiece* piece : pieces) {
    search.expert.push_back(piece->expert);
    search.job.push_back(expert_cost(piece->count, cost));
  }
  search.assign(0, 0.0);
  return pieces.empty() ? 0.0 : search.best;
}

// The split rule, written out independently of the engine: how many pieces greedy cuts expert e into.
inline int expected_pieces(const std::vector<int32_t>& rows, size_t e, const PlacementConfig& cfg) {
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
  const int64_t fair = (total + cfg.devices - 1) / cfg.devices;
  if (rows[e] == 0) return 0;
  if (!cfg.greedy_split || rows[e] <= fair) return 1;
  int64_t k = std::min<int64_t>(cfg.devices, (rows[e] + fair - 1) / fair);
  while (k > 1 && rows[e] / k < cfg.min_tokens) --k;
  return int(k);
}

// The minimum makespan over all D^E assignments of the experts that have rows.
inline double optimal_makespan(const std::vector<int32_t>& rows, int D, const ExpertCostModel& cost) {
  std::vector<double> costs;
  for (int32_t r : rows)
    if (r > 0) costs.push_back(expert_cost(r, cost));
  int64_t assignments = 1;
  for (size_t i = 0; i < costs.size(); ++i) assignments *= D;
  double best = INFINITY;
  for (int64_t a = 0; a < assignments; ++a) {
    std::vector<double> device(D, 0.0);
    int64_t code = a;
    for (double c : costs) {
      device[code % D] += c;
      code /= D;
    }
    best = std::min(best, *std::max_element(device.begin(), device.end()));
  }
  return costs.empty() ? 0.0 : best;
}

// Structural checks every policy must pass: pieces in expert order, each expert's pieces cover [0, rows)
// exactly once on distinct devices, loads and counters agree with the pieces.
inline void check_placement(const Placement& p, const std::vector<int32_t>& rows, int D, const std::string& where) {
  std::vector<int32_t> covered(rows.size(), 0);
  std::vector<int64_t> load(D, 0);
  int64_t spilled = 0;
  int moved = 0, last_expert = -1;
  std::vector<std::vector<int>> devices_of(rows.size());
  for (const ExpertPiece& piece : p.pieces) {
    CHECK_MSG(piece.expert >= last_expert && piece.device >= 0 && piece.device < D && piece.count > 0,
              where + ": piece out of order or range");
    CHECK_MSG(piece.begin == covered[piece.expert], where + ": pieces of expert " + std::to_string(piece.expert) + " not contiguous");
    auto& seen = devices_of[piece.expert];
    CHECK_MSG(std::find(seen.begin(), seen.end(), piece.device) == seen.end(), where + ": two pieces of one expert on a device");
    seen.push_back(piece.device);
    covered[piece.expert] += piece.count;
    load[piece.device] += piece.count;
    last_expert = piece.expert;
    if (piece.device != piece.expert % D) {
      spilled += piece.count;
      ++moved;
    }
  }
  CHECK_MSG(covered == rows, where + ": pieces do not cover every expert's rows exactly");
  CHECK_MSG(load == p.load_after, where + ": load_after disagrees with the pieces");
  CHECK_MSG(sum(p.load_before) == sum(p.load_after), where + ": total load changed");
  CHECK_MSG(spilled == p.spilled_tokens && moved == p.moved_experts, where + ": spill counters disagree");
  for (size_t e = 0; e < rows.size(); ++e) CHECK(p.home[e] == int(e) % D);
}

// LLEP's guarantees: receivers stay within alpha × mean, donors never receive, and a piece below min_tokens is
// only ever a whole expert that small.
inline void check_least_loaded(const Placement& p, const PlacementConfig& cfg, const std::vector<int32_t>& rows,
                        const std::string& where) {
  const double mean = double(sum(p.load_before)) / cfg.devices;
  for (const ExpertPiece& piece : p.pieces) {
    CHECK_MSG(piece.count >= cfg.min_tokens || piece.count == rows[piece.expert], where + ": piece below min_tokens");
    if (piece.device == p.home[piece.expert]) continue;
    CHECK_MSG(double(p.load_after[piece.device]) <= cfg.alpha * mean, where + ": receiver above alpha × mean");
    CHECK_MSG(double(p.load_before[piece.device]) <= mean, where + ": an overloaded device received");
    CHECK_MSG(double(p.load_before[p.home[piece.expert]]) > mean, where + ": a device at or below mean spilled");
  }
}

template <typename F>
inline void check_fails_naming(F&& call, const std::string& field) {
  try {
    call();
    CHECK_MSG(false, field + ": accepted an invalid value");
  } catch (const moe::EngineError& e) {
    CHECK_MSG(std::string(e.what()).rfind(field + ":", 0) == 0, std::string("expected ") + field + ", got: " + e.what());
  }
}

}  // namespace placement_test
