// Expert placement across devices: the static map; Graham's whole-expert greedy against brute-forced
// optima; LLEP's fallback, cap, exact cover and minimum piece size; the policies under 95% skew; determinism;
// errors. The splitting greedy has its own file, test_placement_split.cpp.
#include "placement_checks.h"
#include "testing.h"

using namespace placement_test;

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
  // 4096 tokens × top-2 on 8 devices: skewed (hot, Zipf) and flat workloads, with the properties each policy must show.
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
