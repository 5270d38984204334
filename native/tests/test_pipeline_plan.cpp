// Pipelining plans: MPipeMoE's Algorithm 1 (cache, range lookup, merge or insert, non-monotone trials)
// and searchBestGran's tie rule; the memory-reuse cost model of eq. 10 and savings of eqs. 4-6 on a hand-computed
// case, Table II's Q, the strategy choice as copy bandwidth moves, ties, and errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "pipeline/granularity_search.h"
#include "pipeline/memory_reuse.h"
#include "test_files.h"
#include "testing.h"

using moe::GranularitySearch;
using moe::LayerSizes;
using moe::ReuseStrategy;
using moe::StreamSpeeds;
using moe_test::expect_error;
using Ranges = std::vector<GranularitySearch::Range>;

namespace {

// A search whose trial answers from `table` and counts its calls.
struct TableSearch {
  std::map<int64_t, int> table;
  int calls = 0;
  GranularitySearch search{[this](int64_t B) {
    ++calls;
    return table.at(B);
  }};
};

bool disjoint_and_sorted(const Ranges& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].lower > ranges[i].upper || (i > 0 && ranges[i - 1].upper >= ranges[i].lower)) return false;
  return true;
}

// The small layer every cost test uses: B = 8, M = 2, H = 8 (r = H/M = 4, Table II's case), E = 4, n = 4,
// 2-byte elements. One GEMM over B is v_comp = 2·8·8·2 = 256 FLOP; one all-to-all or T_DI copy 8·2·2 = 32 bytes.
LayerSizes small_layer() { return {8, 2, 8, 4, 4, 2}; }

// Speeds at which one GEMM, one all-to-all and one T_DI copy over all B tokens take these many ms.
StreamSpeeds speeds_for(double gemm_ms, double all_to_all_ms, double copy_ms) {
  StreamSpeeds w;
  w.w_comp = 256.0 / (gemm_ms * 1e-3);
  w.w_comm = 32.0 / (all_to_all_ms * 1e-3);
  w.w_mem = 32.0 / (copy_ms * 1e-3);
  return w;
}

}  // namespace

TEST(cache_hit_and_range_hit_skip_the_trial) {
  TableSearch t;
  t.table = {{100, 2}, {200, 2}};
  CHECK(t.search.choose(100) == 2 && t.calls == 1);
  CHECK(t.search.choose(100) == 2 && t.calls == 1);  // lines 3-5: cache_table
  CHECK(t.search.choose(200) == 2 && t.calls == 2);  // a trial, merged: [100, 200] → 2
  CHECK(t.search.choose(150) == 2 && t.calls == 2);  // line 6: inside the range, never tried
  CHECK(t.search.choose(150) == 2 && t.calls == 2 && t.search.trials() == 2);
}

TEST(merging_extends_a_range_and_a_new_n_inserts_one) {
  TableSearch t;
  t.table = {{100, 2}, {200, 2}, {50, 2}, {1000, 8}, {600, 8}, {400, 4}};
  for (int64_t B : {100, 200}) t.search.choose(B);
  CHECK((t.search.ranges() == Ranges{{100, 200, 2}}));
  t.search.choose(50);  // extends downwards: min(B, lower)
  CHECK((t.search.ranges() == Ranges{{50, 200, 2}}));
  t.search.choose(1000);  // a new n: (B, B)
  CHECK((t.search.ranges() == Ranges{{50, 200, 2}, {1000, 1000, 8}}));
  t.search.choose(600);  // extends upwards from below it: the range's lower moves to 600
  t.search.choose(400);
  CHECK((t.search.ranges() == Ranges{{50, 200, 2}, {400, 400, 4}, {600, 1000, 8}}));
  CHECK(t.search.trials() == 6);
  CHECK(t.search.choose(800) == 8 && t.search.choose(199) == 2 && t.search.trials() == 6);
}

TEST(monotone_trials_give_disjoint_sorted_ranges_that_agree_with_them) {
  // The best n doubles every 1000 tokens from 1 to 16: the paper's hypothesis holds.
  const auto best = [](int64_t B) { return 1 << std::min<int64_t>(4, B / 1000); };
  int calls = 0;
  GranularitySearch search([&](int64_t B) {
    ++calls;
    return best(B);
  });
  const int queries = 3000;
  for (int i = 0; i < queries; ++i) {
    const int64_t B = 1 + int64_t(moe::random_u64(5, 0, i) % 6000);
    CHECK_MSG(search.choose(B) == best(B), "B = " + std::to_string(B));
  }
  const auto ranges = search.ranges();
  CHECK(disjoint_and_sorted(ranges));
  CHECK(ranges.size() == 5);  // one range per n, as the paper's one-to-one map
  for (const auto& r : ranges) CHECK(best(r.lower) == r.n && best(r.upper) == r.n);
  CHECK(search.trials() == calls && calls < queries / 4);
  std::printf("  %d trials for %d queries\n", calls, queries);
}

TEST(non_monotone_trials_never_merge_across_another_n) {
  TableSearch t;
  t.table = {{100, 2}, {300, 4}, {500, 2}, {400, 2}, {200, 2}, {250, 4}, {600, 4}};
  for (int64_t B : {100, 300, 500}) t.search.choose(B);
  // 500's n is 2, but [100] → 2 lies beyond 300's range of 4: merging would swallow it, so 500 gets its own.
  CHECK((t.search.ranges() == Ranges{{100, 100, 2}, {300, 300, 4}, {500, 500, 2}}));
  t.search.choose(400);  // merges with its neighbour above, the nearer range of 2
  t.search.choose(200);  // and 200 with its neighbour below
  t.search.choose(250);  // 4: merges with 300's range above
  t.search.choose(600);  // 4 again, but its only neighbour is [400, 500] → 2: a second range of 4
  CHECK((t.search.ranges() == Ranges{{100, 200, 2}, {250, 300, 4}, {400, 500, 2}, {600, 600, 4}}));
  CHECK(disjoint_and_sorted(t.search.ranges()) && t.search.trials() == 7);
  CHECK(t.search.choose(150) == 2 && t.search.choose(275) == 4 && t.search.choose(450) == 2 && t.search.trials() == 7);
  CHECK(t.search.choose(300) == 4 && t.search.choose(500) == 2);  // the cache agrees with the ranges
}

TEST(best_granularity_takes_the_fastest_ties_to_the_smaller_n) {
  const std::map<int, double> ms = {{1, 5.0}, {2, 3.0}, {4, 3.0}, {8, 4.0}};
  int measured = 0;
  const auto measure = [&](int n) {
    ++measured;
    return ms.at(n);
  };
  CHECK(moe::best_granularity({1, 2, 4, 8}, measure) == 2 && measured == 4);
  CHECK(moe::best_granularity({8, 4, 2, 1}, measure) == 2);
  CHECK(moe::best_granularity({8, 4}, measure) == 4);
  CHECK(moe::best_granularity({4, 1, 2}, [](int) { return 7.0; }) == 1);
  CHECK(moe::best_granularity({8}, measure) == 8);
}

TEST(search_by_trials_feeds_algorithm_1) {
  // A toy pipeline: each micro-batch adds 0.5 ms of launch overhead, and what does not overlap (one micro-batch's
  // transfer) is B/n × 0.001 ms, so the best n grows with B, about sqrt(B / 500).
  const std::vector<int> candidates = {1, 2, 4, 8, 16};
  GranularitySearch search([&](int64_t B) {
    return moe::best_granularity(candidates, [&](int n) { return 0.5 * n + 0.001 * double(B) / n; });
  });
  int last = 0;
  for (int64_t B = 256; B <= 131072; B *= 2) {
    const int n = search.choose(B);
    CHECK(n >= last);
    last = n;
  }
  CHECK(last == 16 && disjoint_and_sorted(search.ranges()) && search.ranges().size() == 5);
}

TEST(granularity_errors_name_the_field) {
  GranularitySearch returns_zero([](int64_t) { return 0; });
  const auto one_ms = [](int) { return 1.0; };
  expect_error([&] { returns_zero.choose(0); }, "pipeline.B:", "no tokens");
  expect_error([&] { returns_zero.choose(64); }, "pipeline.n:", "trial returned 0");
  expect_error([] { GranularitySearch none{nullptr}; }, "pipeline.trial:", "no trial");
  expect_error([&] { moe::best_granularity({}, one_ms); }, "pipeline.candidates:", "no candidates");
  expect_error([&] { moe::best_granularity({2, 0}, one_ms); }, "pipeline.candidates:", "candidate 0");
  expect_error([] { moe::best_granularity({2}, [](int) { return NAN; }); }, "pipeline.measure_ms:", "NaN time");
  expect_error([] { moe::best_granularity({2}, [](int) { return -1.0; }); }, "pipeline.measure_ms:", "negative time");
}

TEST(hand_computed_costs_and_savings) {
  // One GEMM 1 ms, one all-to-all 0.5 ms, one T_DI copy 2 ms (T_M's: 8 ms); μ_comp 0.8, μ_all 0.5, η_all 0.5.
  StreamSpeeds w = speeds_for(1.0, 0.5, 2.0);
  w.mu_comp = 0.8;
  w.mu_all = 0.5;
  w.eta_all = 0.5;
  const auto costs = moe::reuse_costs(w, small_layer());
  // forward, backward = max(q1·1, q2·0.5/μ, q3·2/η):
  //   none [2,2,0] [4,2,0] μ .8 → max(2, 1.25) = 2, max(4, 1.25) = 4
  //   S1 [2,2,5] [4,2,5] → max(2, 2, 20) = 20, max(4, 2, 20) = 20
  //   S2 [2,2,4] [4,3,4] → 16, max(4, 3, 16) = 16
  //   S3 [2,2,1] [5,2,1] → max(2, 2, 4) = 4, max(5, 2, 4) = 5
  //   S4 [2,2,0] [5,3,0] μ .8 → 2, max(5, 1.875) = 5
  const double fw[] = {2, 20, 16, 4, 2}, bw[] = {4, 20, 16, 5, 5}, extra[] = {0, 34, 26, 3, 1};
  for (int i = 0; i < 5; ++i) {
    CHECK(costs[i].strategy == ReuseStrategy(i));
    CHECK_NEAR(costs[i].forward_ms, fw[i], 1e-9);
    CHECK_NEAR(costs[i].backward_ms, bw[i], 1e-9);
    CHECK_NEAR(costs[i].extra_ms, extra[i], 1e-9);
  }
  CHECK(costs[1].mu == 0.5 && costs[1].eta == 0.5 && costs[4].mu == 0.8 && costs[4].eta == 0);
  // Eq. 5: 8·(2·2·2/4 + 8·3/4) = 64 elements each for activations and buffers, × 2 bytes → 256 bytes saved.
  // Eq. 6: M_ms = 4·(4·2 + 2·8·2)·2 = 320, M_act^pipe = M_buf^pipe = (4·8·2 + 8·8)·2 = 256 → φ = 256 / 832.
  CHECK(costs[0].saved_bytes == 0 && costs[0].saving_ratio == 0);
  for (int i = 1; i < 5; ++i) {
    CHECK_NEAR(costs[i].saved_bytes, 256.0, 1e-9);
    CHECK_NEAR(costs[i].saving_ratio, 256.0 / 832.0, 1e-12);
  }
  CHECK(moe::choose_strategy(w, small_layer()) == ReuseStrategy::S4);
}

TEST(table_two_q_and_its_scaling_with_h_over_m) {
  const auto costs = moe::reuse_costs(speeds_for(1, 1, 1), small_layer());
  using Q = std::array<double, 3>;
  const Q fw[] = {{2, 2, 0}, {2, 2, 5}, {2, 2, 4}, {2, 2, 1}, {2, 2, 0}};
  const Q bw[] = {{4, 2, 0}, {4, 2, 5}, {4, 3, 4}, {5, 2, 1}, {5, 3, 0}};
  for (int i = 0; i < 5; ++i) CHECK(costs[i].q_fw == fw[i] && costs[i].q_bw == bw[i]);
  LayerSizes wide = small_layer();
  wide.H = 16;  // T_M is 8 T_DI copies now
  const auto wide_costs = moe::reuse_costs(speeds_for(1, 1, 1), wide);
  CHECK(wide_costs[1].q_fw[2] == 9 && wide_costs[2].q_bw[2] == 8 && wide_costs[3].q_bw[2] == 1);
}

TEST(time_does_not_depend_on_n_but_the_saving_grows_with_it) {
  LayerSizes layer = small_layer();
  double last_saved = -1;
  for (int n : {2, 4, 8}) {
    layer.n = n;
    const auto costs = moe::reuse_costs(speeds_for(1.0, 0.5, 2.0), layer);
    CHECK_NEAR(costs[3].forward_ms + costs[3].backward_ms, 2 + 5, 1e-9);  // S3: max(2, 1, 2) + max(5, 1, 2)
    CHECK(costs[1].saved_bytes > last_saved);
    last_saved = costs[1].saved_bytes;
  }
  layer.n = 2;  // eq. 5 at n = 2: only T_M's buffer is halved, 8·8/2 = 32 elements each, × 2 × 2 bytes
  CHECK_NEAR(moe::reuse_costs(speeds_for(1, 1, 1), layer)[2].saved_bytes, 128.0, 1e-9);
}

TEST(strategy_follows_copy_bandwidth) {
  const LayerSizes layer = small_layer();
  // Copies nearly free, a slow network (all-to-all 1.5 ms): offloading both wins. S1 = max(2, 3) + 4 = 7,
  // S2 = 3 + max(4, 4.5) = 7.5, S3 = 3 + 5 = 8, S4 = 3 + max(5, 4.5) = 8.
  CHECK(moe::choose_strategy(speeds_for(1.0, 1.5, 1e-6), layer) == ReuseStrategy::S1);
  // Copies very slow: only S4 avoids the copy stream. S4 = 2 + 5 = 7; S3 = 2·100 = 200, S1, S2 far more.
  CHECK(moe::choose_strategy(speeds_for(1.0, 0.5, 100.0), layer) == ReuseStrategy::S4);
  // Copies at GEMM speed, all-to-all 2 ms: re-sending T_DI (S2, S4) and copying T_M (S1, S2) both hurt.
  // S1 = 5 + 5, S2 = 4 + 6, S3 = 4 + 5 = 9, S4 = 4 + 6: offload T_DI, recompute T_M.
  CHECK(moe::choose_strategy(speeds_for(1.0, 2.0, 1.0), layer) == ReuseStrategy::S3);
  // An all-to-all slowed by concurrent copies (μ_all 0.25) costs S1-S3 even when copies are free:
  // S1 = max(2, 4) + 4 = 8 loses to S4 = 2 + 5.
  StreamSpeeds contended = speeds_for(1.0, 0.5, 1e-6);
  contended.mu_all = 0.25;
  CHECK(moe::choose_strategy(contended, layer) == ReuseStrategy::S4);
}

TEST(strategy_ties_go_to_table_two_order) {
  const LayerSizes layer = small_layer();
  // Compute-bound: S1 = S2 = 2 + 4 (S3 = S4 = 7).
  auto costs = moe::reuse_costs(speeds_for(1.0, 0.5, 1e-6), layer);
  CHECK(costs[1].forward_ms + costs[1].backward_ms == costs[2].forward_ms + costs[2].backward_ms);
  CHECK(moe::choose_strategy(speeds_for(1.0, 0.5, 1e-6), layer) == ReuseStrategy::S1);
  // T_DI copy 2 ms: S3 = max(2, 2) + max(5, 2) = 7 = S4, S1 and S2 far more.
  costs = moe::reuse_costs(speeds_for(1.0, 0.5, 2.0), layer);
  CHECK(costs[3].forward_ms + costs[3].backward_ms == costs[4].forward_ms + costs[4].backward_ms);
  CHECK(moe::choose_strategy(speeds_for(1.0, 0.5, 2.0), layer) == ReuseStrategy::S3);
}

TEST(memory_reuse_errors_name_the_field) {
  using Edit = std::function<void(StreamSpeeds&, LayerSizes&)>;
  const std::vector<std::pair<std::string, Edit>> cases = {
      {"w_comp", [](StreamSpeeds& w, LayerSizes&) { w.w_comp = 0; }},
      {"w_comm", [](StreamSpeeds& w, LayerSizes&) { w.w_comm = NAN; }},
      {"w_mem", [](StreamSpeeds& w, LayerSizes&) { w.w_mem = INFINITY; }},
      {"sigma", [](StreamSpeeds& w, LayerSizes&) { w.sigma = 0; }},
      {"mu_comp", [](StreamSpeeds& w, LayerSizes&) { w.mu_comp = 1.5; }},
      {"mu_all", [](StreamSpeeds& w, LayerSizes&) { w.mu_all = -0.5; }},
      {"eta_all", [](StreamSpeeds& w, LayerSizes&) { w.eta_all = NAN; }},
      {"B", [](StreamSpeeds&, LayerSizes& l) { l.B = 0; }},
      {"M", [](StreamSpeeds&, LayerSizes& l) { l.M = 0; }},
      {"H", [](StreamSpeeds&, LayerSizes& l) { l.H = -4; }},
      {"E", [](StreamSpeeds&, LayerSizes& l) { l.E = 0; }},
      {"bytes_per_element", [](StreamSpeeds&, LayerSizes& l) { l.bytes_per_element = 0; }},
      {"n", [](StreamSpeeds&, LayerSizes& l) { l.n = 1; }},
      {"n", [](StreamSpeeds&, LayerSizes& l) { l.n = 9; }},  // more partitions than B
  };
  for (const auto& [field, edit] : cases) {
    StreamSpeeds w = speeds_for(1, 1, 1);
    LayerSizes l = small_layer();
    edit(w, l);
    expect_error([&] { moe::reuse_costs(w, l); }, "pipeline." + field + ":", field);
    expect_error([&] { moe::choose_strategy(w, l); }, "pipeline." + field + ":", field);
  }
}

TEST_MAIN()
