// Expert placement across devices (issue 7): the static map; Graham's whole-expert greedy against brute-forced
// optima; the splitting greedy's pieces, its bounds against brute force and the bound it does not keep; LLEP's
// fallback, cap, exact cover and minimum piece size; the policies under 95% skew; determinism; errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "placement/placement.h"
#include "testing.h"

using moe::ExpertCostModel;
using moe::ExpertPiece;
using moe::Placement;
using moe::PlacementConfig;
using moe::PlacementPolicy;

namespace {

PlacementConfig config(PlacementPolicy policy, int devices) {
  PlacementConfig cfg;
  cfg.policy = policy;
  cfg.devices = devices;
  return cfg;
}

// ES-MoE's greedy as it was before splitting: every expert whole.
PlacementConfig whole_greedy(int devices) {
  PlacementConfig cfg = config(PlacementPolicy::Greedy, devices);
  cfg.greedy_split = false;
  return cfg;
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t(0)); }

// Splits `total` rows in proportion to `weights`, largest remainders first (ties: lower expert), so the counts
// sum to `total` exactly.
std::vector<int32_t> apportion(const std::vector<double>& weights, int64_t total) {
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
std::vector<int32_t> hot_rows(int E, int N, int K, double hot_fraction) {
  const int32_t hot = int32_t(std::lround(hot_fraction * N));
  std::vector<int32_t> rest = apportion(std::vector<double>(E - 1, 1.0), int64_t(N) * K - hot);
  rest.insert(rest.begin(), hot);
  return rest;
}
std::vector<int32_t> zipf_rows(int E, int N, int K, double s) {
  std::vector<double> w(E);
  for (int e = 0; e < E; ++e) w[e] = 1.0 / std::pow(e + 1.0, s);
  return apportion(w, int64_t(N) * K);
}
std::vector<int32_t> uniform_rows(int E, int N, int K) { return apportion(std::vector<double>(E, 1.0), int64_t(N) * K); }

// Random rows per expert: some zero, some tiny, one expert sometimes far hotter than the rest.
std::vector<int32_t> random_rows(uint64_t instance, int E, int max_rows) {
  std::vector<int32_t> rows(E);
  for (int e = 0; e < E; ++e) {
    const uint64_t r = moe::random_u64(7, instance, e);
    rows[e] = r % 5 == 0 ? 0 : int32_t((r >> 8) % uint64_t(max_rows + 1));
  }
  if (moe::random_u64(7, instance, E) % 3 == 0) rows[moe::random_u64(7, instance, E + 1) % E] += 20 * max_rows;
  return rows;
}

double expert_cost(int32_t rows, const ExpertCostModel& cost) {
  return std::max(cost.upload_ms_per_expert, rows * cost.compute_ms_per_token);
}

// The greedy's objective: the largest sum of piece costs on a device (a piece costs as an expert of its rows).
double makespan(const Placement& p, int D, const ExpertCostModel& cost) {
  std::vector<double> device(D, 0.0);
  for (const ExpertPiece& piece : p.pieces) device[piece.device] += expert_cost(piece.count, cost);
  return *std::max_element(device.begin(), device.end());
}

// The minimum makespan over all assignments of the placement's own pieces (the same cuts) to D devices, by
// exhaustive search with pruning. one_per_device: only the assignments with at most one piece of an expert per
// device (the constraint the greedy keeps); otherwise any assignment.
double optimal_piece_makespan(const Placement& p, int D, const ExpertCostModel& cost, bool one_per_device) {
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
int expected_pieces(const std::vector<int32_t>& rows, size_t e, const PlacementConfig& cfg) {
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
  const int64_t fair = (total + cfg.devices - 1) / cfg.devices;
  if (rows[e] == 0) return 0;
  if (!cfg.greedy_split || rows[e] <= fair) return 1;
  int64_t k = std::min<int64_t>(cfg.devices, (rows[e] + fair - 1) / fair);
  while (k > 1 && rows[e] / k < cfg.min_tokens) --k;
  return int(k);
}

// The minimum makespan over all D^E assignments of the experts that have rows.
double optimal_makespan(const std::vector<int32_t>& rows, int D, const ExpertCostModel& cost) {
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
void check_placement(const Placement& p, const std::vector<int32_t>& rows, int D, const std::string& where) {
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
void check_least_loaded(const Placement& p, const PlacementConfig& cfg, const std::vector<int32_t>& rows,
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
void check_fails_naming(F&& call, const std::string& field) {
  try {
    call();
    CHECK_MSG(false, field + ": accepted an invalid value");
  } catch (const moe::EngineError& e) {
    CHECK_MSG(std::string(e.what()).rfind(field + ":", 0) == 0, std::string("expected ") + field + ", got: " + e.what());
  }
}

}  // namespace

TEST(static_puts_expert_e_on_device_e_mod_d) {
  const std::vector<int32_t> rows = {5, 0, 7, 1, 9, 2, 3};
  const Placement p = moe::place_experts(config(PlacementPolicy::Static, 3), rows, {});
  check_placement(p, rows, 3, "static");
  CHECK(p.pieces.size() == 6);  // expert 1 has no rows, so no piece
  for (const ExpertPiece& piece : p.pieces) CHECK(piece.device == piece.expert % 3 && piece.begin == 0);
  CHECK((p.load_before == std::vector<int64_t>{5 + 1 + 3, 0 + 9, 7 + 2}));
  CHECK(p.load_after == p.load_before);
  CHECK_NEAR(p.imbalance_before, 9.0 / (27.0 / 3), 1e-12);
  CHECK(p.imbalance_after == p.imbalance_before && p.spilled_tokens == 0 && p.moved_experts == 0);
}

TEST(no_rows_means_no_pieces_and_imbalance_one) {
  for (PlacementPolicy policy : {PlacementPolicy::Static, PlacementPolicy::Greedy, PlacementPolicy::LeastLoaded}) {
    const Placement p = moe::place_experts(config(policy, 4), std::vector<int32_t>(8, 0), {});
    CHECK(p.pieces.empty() && p.imbalance_before == 1.0 && p.imbalance_after == 1.0);
  }
}

TEST(least_loaded_is_static_when_balanced_enough) {
  const auto same_as_static = [](const PlacementConfig& cfg, const std::vector<int32_t>& rows) {
    const Placement llep = moe::place_experts(cfg, rows, {});
    const Placement fixed = moe::place_experts(config(PlacementPolicy::Static, cfg.devices), rows, {});
    return llep.load_after == fixed.load_after && llep.pieces.size() == fixed.pieces.size() && llep.spilled_tokens == 0;
  };
  PlacementConfig cfg = config(PlacementPolicy::LeastLoaded, 8);
  CHECK(same_as_static(cfg, uniform_rows(64, 4096, 2)));
  cfg.devices = 4;
  CHECK(same_as_static(cfg, {125, 100, 100, 75}));  // max/mean 1.25 < lambda 1.3
  CHECK(same_as_static(cfg, {130, 90, 90, 90}));    // max/mean exactly lambda: still balanced enough
  cfg.lambda = 1.2;                                 // 1.25 > 1.2, but the excess 25 is below min_tokens 32
  CHECK(same_as_static(cfg, {125, 100, 100, 75}));
  cfg.min_tokens = 1;                               // now it spills the excess to the least-loaded device
  const Placement spilled = moe::place_experts(cfg, {125, 100, 100, 75}, {});
  CHECK((spilled.load_after == std::vector<int64_t>{100, 100, 100, 100}) && spilled.moved_experts == 1);
  CHECK(spilled.pieces[0].device == 0 && spilled.pieces[0].count == 100 && spilled.pieces[1].device == 3);
}

TEST(greedy_breaks_ties_by_lower_expert_then_lower_device) {
  const std::vector<int32_t> rows = {10, 10, 10, 10, 30};
  // No expert is above the fair share ceil(70 / 2) = 35, so splitting or not, every expert stays whole.
  for (const PlacementConfig& cfg : {config(PlacementPolicy::Greedy, 2), whole_greedy(2)}) {
    const Placement p = moe::place_experts(cfg, rows, {});
    // Order by cost: 4 (30), then 0, 1, 2, 3. Expert 4 takes device 0; 0, 1, 2 fill device 1; 3 ties at 30 → 0.
    const std::vector<int> expected = {1, 1, 1, 0, 0};
    CHECK(p.pieces.size() == 5);
    for (const ExpertPiece& piece : p.pieces) CHECK(piece.device == expected[piece.expert]);
    CHECK((p.load_after == std::vector<int64_t>{40, 30}));
  }
}

TEST(greedy_is_within_the_lpt_bound_of_the_optimum) {
  // The whole-expert greedy (greedy_split = false) is exactly Graham's LPT over the experts.
  const ExpertCostModel by_tokens{1.0, 0.0}, with_upload{0.5, 40.0};
  int instances = 0, optimal = 0, split_better = 0;
  for (const ExpertCostModel& cost : {by_tokens, with_upload})
    for (uint64_t i = 0; i < 500; ++i) {
      const int E = 1 + int(moe::random_u64(11, i, 0) % 8), D = 2 + int(moe::random_u64(11, i, 1) % 2);
      const std::vector<int32_t> rows = random_rows(i, E, 100);
      const Placement p = moe::place_experts(whole_greedy(D), rows, cost);
      check_placement(p, rows, D, "greedy instance " + std::to_string(i));
      CHECK(p.pieces.size() == size_t(std::count_if(rows.begin(), rows.end(), [](int32_t r) { return r > 0; })));
      const double greedy = makespan(p, D, cost), best = optimal_makespan(rows, D, cost);
      // Graham (1969): LPT ≤ (4/3 − 1/(3D)) × optimum.
      CHECK_MSG(greedy <= (4.0 / 3.0 - 1.0 / (3.0 * D)) * best + 1e-9,
                "instance " + std::to_string(i) + ": greedy " + std::to_string(greedy) + " vs optimum " + std::to_string(best));
      ++instances;
      optimal += greedy <= best + 1e-9;
      // The default (splitting) greedy never does worse than the whole-expert one, so the bound carries over.
      PlacementConfig split = whole_greedy(D);
      split.greedy_split = true;
      split.min_tokens = 1;
      const double cut = makespan(moe::place_experts(split, rows, cost), D, cost);
      CHECK_MSG(cut <= greedy + 1e-9 && cut <= (4.0 / 3.0 - 1.0 / (3.0 * D)) * best + 1e-9,
                "instance " + std::to_string(i) + ": split greedy " + std::to_string(cut));
      split_better += cut < greedy - 1e-9;
    }
  std::printf("  greedy optimal on %d of %d instances; the splitting greedy better on %d\n", optimal, instances,
              split_better);
}

TEST(least_loaded_keeps_its_guarantees_on_random_instances) {
  int spilling = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    PlacementConfig cfg = config(PlacementPolicy::LeastLoaded, 1 + int(moe::random_u64(13, i, 0) % 8));
    cfg.alpha = 1.0 + double(moe::random_u64(13, i, 1) % 50) / 100.0;
    cfg.lambda = 1.0 + double(moe::random_u64(13, i, 2) % 50) / 100.0;
    cfg.min_tokens = 1 + int(moe::random_u64(13, i, 3) % 64);
    const std::vector<int32_t> rows = random_rows(i, 1 + int(moe::random_u64(13, i, 4) % 64), 300);
    const Placement p = moe::place_experts(cfg, rows, {});
    const std::string where = "llep instance " + std::to_string(i);
    check_placement(p, rows, cfg.devices, where);
    check_least_loaded(p, cfg, rows, where);
    CHECK_MSG(p.imbalance_after <= p.imbalance_before, where + ": made the imbalance worse");
    spilling += p.spilled_tokens > 0;
  }
  std::printf("  %d of 2000 instances spilled\n", spilling);
  CHECK(spilling >= 500);  // the guarantees above were exercised, not only the fallback
}

TEST(least_loaded_balances_95_percent_skew) {
  for (int E : {64, 8})
    for (int K : {1, 2}) {  // K = 1: 95% of all rows on one expert; K = 2: 95% of tokens pick it among two
      const std::vector<int32_t> rows = hot_rows(E, 8192 / K, K, 0.95);
      const PlacementConfig cfg = config(PlacementPolicy::LeastLoaded, 8);
      const Placement p = moe::place_experts(cfg, rows, {});
      const std::string where = "E=" + std::to_string(E) + " K=" + std::to_string(K);
      check_placement(p, rows, 8, where);
      check_least_loaded(p, cfg, rows, where);
      CHECK_MSG(p.pieces[0].expert == 0 && p.pieces[0].device == 0 && p.pieces[1].expert == 0,
                where + ": the hot expert should be split, its first rows kept at home");
      CHECK_MSG(p.imbalance_before > 3.5 && p.imbalance_after <= 1.15 && p.imbalance_after <= cfg.alpha,
                where + ": imbalance " + std::to_string(p.imbalance_before) + " -> " + std::to_string(p.imbalance_after));
    }
}

TEST(greedy_under_95_percent_skew_is_the_hot_expert_alone) {
  // Whole-expert greedy (greedy_split = false): the hot expert (H rows of T) is placed first, whole, on device 0;
  // H > T/D keeps device 0 the most loaded for the rest of the schedule, so every other expert lands elsewhere:
  // imbalance_after = H × D / T exactly.
  for (int E : {64, 8})
    for (int K : {1, 2}) {
      const std::vector<int32_t> rows = hot_rows(E, 8192 / K, K, 0.95);
      const Placement p = moe::place_experts(whole_greedy(8), rows, {});
      check_placement(p, rows, 8, "greedy hot");
      CHECK(p.load_after[0] == rows[0]);
      CHECK_NEAR(p.imbalance_after, double(rows[0]) * 8 / 8192, 1e-12);
    }
}

TEST(split_greedy_cuts_experts_above_the_fair_share) {
  const auto devices_and_counts = [](const Placement& p) {
    std::vector<std::vector<int>> out;
    for (const ExpertPiece& piece : p.pieces) out.push_back({piece.expert, piece.device, piece.begin, piece.count});
    return out;
  };
  PlacementConfig cfg = config(PlacementPolicy::Greedy, 3);
  // Total 100, fair ceil(100 / 3) = 34: expert 0 (90) is cut into min(3, ceil(90 / 34)) = 3 pieces of 30. Equal
  // costs go by lower begin, each to the least-loaded device without a piece of expert 0; expert 1 then ties.
  cfg.min_tokens = 1;
  CHECK((devices_and_counts(moe::place_experts(cfg, {90, 10}, {})) ==
         std::vector<std::vector<int>>{{0, 0, 0, 30}, {0, 1, 30, 30}, {0, 2, 60, 30}, {1, 0, 0, 10}}));
  // Pieces of 30 are below min_tokens 32 (the default), so k drops to 2: pieces of 45.
  cfg.min_tokens = 32;
  CHECK((devices_and_counts(moe::place_experts(cfg, {90, 10}, {})) ==
         std::vector<std::vector<int>>{{0, 0, 0, 45}, {0, 1, 45, 45}, {1, 2, 0, 10}}));
  // Pieces of 45 are below 46 too: expert 0 stays whole although it is above the fair share.
  cfg.min_tokens = 46;
  CHECK((devices_and_counts(moe::place_experts(cfg, {90, 10}, {})) ==
         std::vector<std::vector<int>>{{0, 0, 0, 90}, {1, 1, 0, 10}}));
  // Total 160 on 4 devices, fair 40: expert 0 (100) → 3 pieces [0, 33), [33, 66), [66, 100). The 34-row piece goes
  // first (cost), the 33s by begin; experts 1, 2, 3 (20 each, not cut) fill the least-loaded devices.
  cfg = config(PlacementPolicy::Greedy, 4);
  cfg.min_tokens = 1;
  const Placement p = moe::place_experts(cfg, {100, 20, 20, 20}, {});
  CHECK((devices_and_counts(p) == std::vector<std::vector<int>>{
                                      {0, 1, 0, 33}, {0, 2, 33, 33}, {0, 0, 66, 34}, {1, 3, 0, 20}, {2, 3, 0, 20}, {3, 1, 0, 20}}));
  CHECK((p.load_after == std::vector<int64_t>{34, 53, 33, 40}) && p.moved_experts == 5);
  // One device: the fair share is everything, nothing is cut.
  CHECK(moe::place_experts(config(PlacementPolicy::Greedy, 1), {500, 1}, {}).pieces.size() == 2);
}

TEST(split_greedy_pieces_cover_each_expert_once_on_distinct_devices) {
  int split_experts = 0, reduced_by_min_tokens = 0;
  for (uint64_t i = 0; i < 3000; ++i) {
    PlacementConfig cfg = config(PlacementPolicy::Greedy, 1 + int(moe::random_u64(17, i, 0) % 16));
    cfg.min_tokens = 1 + int(moe::random_u64(17, i, 1) % 64);
    const ExpertCostModel cost{1.0, moe::random_u64(17, i, 2) % 2 ? 0.0 : 40.0};
    const std::vector<int32_t> rows = random_rows(i, 1 + int(moe::random_u64(17, i, 3) % 64), 300);
    const Placement p = moe::place_experts(cfg, rows, cost);
    const std::string where = "split greedy instance " + std::to_string(i);
    // Exact cover, contiguous and in order of begin, at most one piece of an expert per device, counters.
    check_placement(p, rows, cfg.devices, where);
    std::vector<std::vector<int32_t>> counts(rows.size());
    for (const ExpertPiece& piece : p.pieces) {
      counts[piece.expert].push_back(piece.count);
      CHECK_MSG(piece.count >= cfg.min_tokens || (piece.count == rows[piece.expert] && rows[piece.expert] < cfg.min_tokens),
                where + ": piece below min_tokens");
    }
    // Either the split schedule (every expert cut by the rule) or, where it loses, the whole-expert one.
    const bool split_kept = std::any_of(counts.begin(), counts.end(), [](const auto& c) { return c.size() > 1; });
    for (size_t e = 0; e < rows.size(); ++e) {
      const int k = split_kept ? expected_pieces(rows, e, cfg) : rows[e] > 0 ? 1 : 0;
      CHECK_MSG(int(counts[e].size()) == k, where + ": expert " + std::to_string(e) + " cut into the wrong number of pieces");
      for (int j = 0; j < int(counts[e].size()) && int(counts[e].size()) == k; ++j)  // piece j = [rows·j/k, rows·(j+1)/k)
        CHECK(counts[e][j] == int32_t(int64_t(rows[e]) * (j + 1) / k - int64_t(rows[e]) * j / k));
      split_experts += k > 1;
      if (!split_kept) continue;
      PlacementConfig unlimited = cfg;
      unlimited.min_tokens = 1;
      reduced_by_min_tokens += expected_pieces(rows, e, unlimited) > k;
    }
  }
  std::printf("  %d experts cut, %d of them (or left whole) fewer pieces for min_tokens\n", split_experts, reduced_by_min_tokens);
  CHECK(split_experts >= 500 && reduced_by_min_tokens >= 100);  // both rules were exercised
}

TEST(split_greedy_against_brute_force) {
  // On small instances (D = 2 or 3, at most 6 experts of 0..40 rows, some with a hot expert of up to 120), each
  // with a cut expert: the split greedy's makespan M against the best assignment of its own pieces.
  //   - M ≤ (2 − 1/D) × OPT_any, OPT_any the optimum over every assignment of the pieces (two pieces of an expert
  //     may share a device), hence also ≤ (2 − 1/D) × OPT_one, the optimum keeping one piece per device.
  //   - M ≤ the whole-expert greedy's makespan, by construction (the split schedule is kept only when it is
  //     better), so Graham's (4/3 − 1/(3D)) × the whole-expert optimum holds (a theorem for the whole LPT).
  // The first is not a proven theorem here: it was checked on about 5 million such random instances (worst seen:
  // 1.49 × OPT_any at D = 2, with upload). Graham's bound is NOT kept against the optimum over the pieces: the
  // one-piece-per-device rule breaks its proof (a piece may be denied the least-loaded device); see
  // split_greedy_keeps_the_whole_schedule_when_cutting_loses.
  const ExpertCostModel by_tokens{1.0, 0.0}, with_upload{0.5, 12.0};
  int instances = 0, optimal = 0, graham_kept = 0, better_than_whole = 0, worse_than_whole = 0;
  double worst_ratio = 0;
  for (uint64_t i = 0; instances < 4000; ++i) {
    const ExpertCostModel& cost = i % 2 ? with_upload : by_tokens;
    const int E = 1 + int(moe::random_u64(19, i, 0) % 6), D = 2 + int(moe::random_u64(19, i, 1) % 2);
    std::vector<int32_t> rows = random_rows(i, E, 40);
    if (rows[0] > 40) rows[0] = 40 + rows[0] % 81;  // random_rows' hot expert, cut down to keep the search small
    PlacementConfig cfg = config(PlacementPolicy::Greedy, D);
    cfg.min_tokens = 1 + int(moe::random_u64(19, i, 2) % 16);
    const Placement p = moe::place_experts(cfg, rows, cost);
    if (p.pieces.size() == size_t(std::count_if(rows.begin(), rows.end(), [](int32_t r) { return r > 0; }))) continue;
    ++instances;
    const std::string where = "instance " + std::to_string(i);
    check_placement(p, rows, D, where);
    const double split = makespan(p, D, cost), any = optimal_piece_makespan(p, D, cost, false),
                 one = optimal_piece_makespan(p, D, cost, true);
    const double whole = makespan(moe::place_experts(whole_greedy(D), rows, cost), D, cost);
    CHECK_MSG(any <= one + 1e-9 && one <= split + 1e-9, where + ": the brute force disagrees with itself");
    CHECK_MSG(split <= (2.0 - 1.0 / D) * any + 1e-9,
              where + ": split greedy " + std::to_string(split) + " vs any-assignment optimum " + std::to_string(any));
    CHECK_MSG(split <= whole + 1e-9,
              where + ": split greedy " + std::to_string(split) + " vs whole greedy " + std::to_string(whole));
    worst_ratio = std::max(worst_ratio, split / any);
    optimal += split <= one + 1e-9;
    graham_kept += split <= (4.0 / 3.0 - 1.0 / (3.0 * D)) * one + 1e-9;
    better_than_whole += split < whole - 1e-9;
    worse_than_whole += split > whole + 1e-9;
  }
  std::printf("  %d instances with a cut: optimal (one piece per device) on %d, within Graham's bound of that optimum on %d;"
              " worst %.4f × the any-assignment optimum; better than whole greedy on %d, worse on %d\n",
              instances, optimal, graham_kept, worst_ratio, better_than_whole, worse_than_whole);
}

TEST(split_greedy_keeps_the_whole_schedule_when_cutting_loses) {
  // D = 3, rows {16, 17, 25, 33}, min_tokens 16: fair 31, expert 3 → [0, 16) and [16, 33). Jobs by cost: 25, 17
  // (expert 1), 17 (expert 3's [16, 33)), 16 (expert 0), 16 (expert 3's [0, 16)) → devices 0, 1, 2, then 1 (tie
  // 17/17: lower device); the last piece may not join its sibling on device 2 (17, the least loaded), so it goes
  // to device 0 (25): makespan 41, above Graham's (4/3 − 1/9) × 33 for the best one-piece-per-device assignment.
  // The whole-expert schedule (33 | 25 | 17 + 16) is 33, so greedy keeps it.
  PlacementConfig cfg = config(PlacementPolicy::Greedy, 3);
  cfg.min_tokens = 16;
  const Placement p = moe::place_experts(cfg, {16, 17, 25, 33}, {});
  CHECK(p.pieces.size() == 4);
  CHECK_NEAR(makespan(p, 3, {}), 33, 1e-12);
  // Cutting can also lose to not cutting outright: D = 2, rows {39, 37}, min_tokens 1: fair 38, expert 0 →
  // 19 + 20; jobs 37, 20, 19 → devices 0, 1, then 19 may not join its sibling: 56, where whole is 39.
  cfg = config(PlacementPolicy::Greedy, 2);
  cfg.min_tokens = 1;
  CHECK_NEAR(makespan(moe::place_experts(cfg, {39, 37}, {}), 2, {}), 39, 1e-12);
}

TEST(split_greedy_balances_95_percent_skew) {
  // 8 devices, 64 experts, 4096 tokens × top-2 = 8192 rows, 95% of the tokens pick expert 0: 3891 rows (47.5%).
  // Fair share 1024, so expert 0 is cut into min(8, ceil(3891 / 1024)) = 4 pieces of 972-973 rows on 4 devices.
  {
    const std::vector<int32_t> rows = hot_rows(64, 4096, 2, 0.95);
    const Placement p = moe::place_experts(config(PlacementPolicy::Greedy, 8), rows, {});
    const Placement whole = moe::place_experts(whole_greedy(8), rows, {});
    check_placement(p, rows, 8, "split greedy hot");
    std::printf("  E=64 K=2 (3891 of 8192 rows hot): static %.4f, whole greedy %.4f, split greedy %.4f (moved %d)\n",
                p.imbalance_before, whole.imbalance_after, p.imbalance_after, p.moved_experts);
    CHECK(rows[0] == 3891 && std::count_if(p.pieces.begin(), p.pieces.end(), [](const ExpertPiece& x) { return x.expert == 0; }) == 4);
    CHECK_NEAR(whole.imbalance_after, 3891.0 * 8 / 8192, 1e-12);  // the hot expert whole: 3.7998 at best
    CHECK(p.imbalance_after <= 1.15);
  }
  // The same skew at other sizes: 2048 tokens (4096 rows), 95% of all rows on one expert (top-1), 8 experts.
  // Under 1.15 except with 8 experts and top-2 (about 1.20): there the 7 cold experts (~614 rows each) are below
  // the fair share and stay whole, the 4 hot pieces (~973) take 4 devices, so some device holds two cold experts;
  // no assignment of those pieces does better.
  for (int E : {64, 8})
    for (int K : {1, 2})
      for (int N : {2048 / K, 8192 / K}) {
        const std::vector<int32_t> rows = hot_rows(E, N, K, 0.95);
        const Placement p = moe::place_experts(config(PlacementPolicy::Greedy, 8), rows, {});
        const std::string where = "E=" + std::to_string(E) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
        check_placement(p, rows, 8, where);
        std::printf("  %s: split greedy %.4f\n", where.c_str(), p.imbalance_after);
        CHECK_MSG(p.imbalance_after < p.imbalance_before, where + ": no better than static");
        CHECK_MSG(p.imbalance_after <= (E == 8 && K == 2 ? 1.21 : 1.15), where + ": imbalance " + std::to_string(p.imbalance_after));
      }
}

TEST(whole_greedy_reproduces_the_old_placement) {
  // greedy_split = false is the greedy as it was: the experts with rows by cost descending (ties: lower expert),
  // each whole on the device with the least accumulated cost (ties: lower device). Written out here again.
  const auto old_greedy = [](const std::vector<int32_t>& rows, int D, const ExpertCostModel& cost) {
    std::vector<int> order(rows.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return expert_cost(rows[a], cost) > expert_cost(rows[b], cost); });
    std::vector<double> load(D, 0.0);
    std::vector<int> device(rows.size(), -1);
    for (int e : order) {
      if (rows[e] == 0) continue;
      const int d = int(std::min_element(load.begin(), load.end()) - load.begin());
      load[d] += expert_cost(rows[e], cost);
      device[e] = d;
    }
    return device;
  };
  std::vector<std::vector<int32_t>> workloads = {hot_rows(64, 4096, 2, 0.95), hot_rows(8, 8192, 1, 0.95),
                                                 zipf_rows(64, 4096, 2, 1.2), uniform_rows(64, 4096, 2)};
  for (uint64_t i = 0; i < 1000; ++i) workloads.push_back(random_rows(i, 1 + int(moe::random_u64(23, i, 0) % 64), 300));
  for (size_t w = 0; w < workloads.size(); ++w)
    for (const ExpertCostModel& cost : {ExpertCostModel{1.0, 0.0}, ExpertCostModel{0.5, 40.0}}) {
      const std::vector<int32_t>& rows = workloads[w];
      const int D = 1 + int(w % 16);
      const Placement p = moe::place_experts(whole_greedy(D), rows, cost);
      const std::vector<int> device = old_greedy(rows, D, cost);
      std::vector<int> got(rows.size(), -1);
      for (const ExpertPiece& piece : p.pieces) {
        CHECK(piece.begin == 0 && piece.count == rows[piece.expert]);
        got[piece.expert] = piece.device;
      }
      CHECK_MSG(got == device, "workload " + std::to_string(w) + ": whole greedy differs from the old greedy");
    }
}

TEST(placement_is_deterministic) {
  const std::vector<int32_t> rows = zipf_rows(64, 4096, 2, 1.2);
  for (PlacementPolicy policy : {PlacementPolicy::Static, PlacementPolicy::Greedy, PlacementPolicy::LeastLoaded}) {
    const Placement a = moe::place_experts(config(policy, 8), rows, {}), b = moe::place_experts(config(policy, 8), rows, {});
    CHECK(a.pieces.size() == b.pieces.size() && a.load_after == b.load_after && a.moved_experts == b.moved_experts);
    for (size_t i = 0; i < std::min(a.pieces.size(), b.pieces.size()); ++i)
      CHECK(a.pieces[i].expert == b.pieces[i].expert && a.pieces[i].device == b.pieces[i].device &&
            a.pieces[i].begin == b.pieces[i].begin && a.pieces[i].count == b.pieces[i].count);
  }
}

TEST(imbalance_of_each_policy_at_d8_e64) {
  // 4096 tokens × top-2 on 8 devices: the numbers issue 7 reports, with the properties they must show.
  const std::vector<std::pair<const char*, std::vector<int32_t>>> workloads = {
      {"hot 95%", hot_rows(64, 4096, 2, 0.95)}, {"zipf 1.2", zipf_rows(64, 4096, 2, 1.2)}, {"uniform", uniform_rows(64, 4096, 2)}};
  for (const auto& [name, rows] : workloads) {
    std::string line = std::string("  ") + name + ":";
    std::vector<double> after;
    for (PlacementPolicy policy : {PlacementPolicy::Static, PlacementPolicy::Greedy, PlacementPolicy::LeastLoaded}) {
      const Placement p = moe::place_experts(config(policy, 8), rows, {});
      after.push_back(p.imbalance_after);
      char cell[96];
      std::snprintf(cell, sizeof cell, " %s %.4f (moved %d, spilled %lld)", moe::placement_policy_name(policy),
                    p.imbalance_after, p.moved_experts, (long long)p.spilled_tokens);
      line += cell;
    }
    const Placement whole = moe::place_experts(whole_greedy(8), rows, {});
    char cell[96];
    std::snprintf(cell, sizeof cell, " (greedy whole %.4f, moved %d)", whole.imbalance_after, whole.moved_experts);
    line += cell;
    std::printf("%s\n", line.c_str());
    CHECK_MSG(after[1] <= after[0] && after[2] <= after[0], std::string(name) + ": a policy did worse than static");
  }
}

TEST(invalid_inputs_fail_naming_the_field) {
  const std::vector<int32_t> rows = {4, 4};
  const auto with = [&](auto edit, ExpertCostModel cost = {}) {
    return [=] {
      PlacementConfig cfg = config(PlacementPolicy::LeastLoaded, 2);
      edit(cfg);
      moe::place_experts(cfg, rows, cost);
    };
  };
  check_fails_naming(with([](PlacementConfig& c) { c.devices = 0; }), "placement.devices");
  check_fails_naming(with([](PlacementConfig& c) { c.lambda = 0.99; }), "placement.lambda");
  check_fails_naming(with([](PlacementConfig& c) { c.lambda = 10.5; }), "placement.lambda");
  check_fails_naming(with([](PlacementConfig& c) { c.lambda = NAN; }), "placement.lambda");
  check_fails_naming(with([](PlacementConfig& c) { c.alpha = 0.5; }), "placement.alpha");
  check_fails_naming(with([](PlacementConfig& c) { c.alpha = 11; }), "placement.alpha");
  check_fails_naming(with([](PlacementConfig& c) { c.min_tokens = 0; }), "placement.min_tokens");
  check_fails_naming(with([](PlacementConfig&) {}, {0.0, 0.0}), "placement.compute_ms_per_token");
  check_fails_naming(with([](PlacementConfig&) {}, {1.0, -1.0}), "placement.upload_ms_per_expert");
  check_fails_naming([] { moe::place_experts(config(PlacementPolicy::Static, 2), {3, -1}, {}); },
                     "placement.tokens_per_expert[1]");
}

TEST_MAIN()
