// The splitting greedy placement: its pieces, its bounds against brute force, the bound it does not keep
// (it keeps the whole-expert schedule when cutting loses) and its balance under 95% skew.
#include "placement_checks.h"
#include "testing.h"

using namespace placement_test;

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

TEST_MAIN()
