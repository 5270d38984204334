#include "placement/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"

namespace moe {
namespace {

void validate(const PlacementConfig& cfg, const std::vector<int32_t>& tokens, const ExpertCostModel& cost) {
  check(cfg.devices >= 1, "placement.devices: must be at least 1, got " + std::to_string(cfg.devices));
  // Written so that NaN fails too.
  check(cfg.lambda >= 1 && cfg.lambda <= 10, "placement.lambda: must be in [1, 10], got " + std::to_string(cfg.lambda));
  check(cfg.alpha >= 1 && cfg.alpha <= 10, "placement.alpha: must be in [1, 10], got " + std::to_string(cfg.alpha));
  check(cfg.min_tokens >= 1, "placement.min_tokens: must be at least 1, got " + std::to_string(cfg.min_tokens));
  check(cost.compute_ms_per_token > 0 && std::isfinite(cost.compute_ms_per_token),
        "placement.compute_ms_per_token: must be a positive finite number");
  check(cost.upload_ms_per_expert >= 0 && std::isfinite(cost.upload_ms_per_expert),
        "placement.upload_ms_per_expert: must be a non-negative finite number");
  for (size_t e = 0; e < tokens.size(); ++e)
    check(tokens[e] >= 0, "placement.tokens_per_expert[" + std::to_string(e) + "]: must not be negative, got " +
                              std::to_string(tokens[e]));
}

// Indices of `key` by value descending, ties lower index first: the order every policy walks in.
template <typename T>
std::vector<int> by_descending(const std::vector<T>& key) {
  std::vector<int> order(key.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[a] > key[b]; });
  return order;
}

std::vector<ExpertPiece> static_pieces(const std::vector<int32_t>& tokens, int devices) {
  std::vector<ExpertPiece> pieces;
  for (int e = 0; e < (int)tokens.size(); ++e)
    if (tokens[e] > 0) pieces.push_back({e, e % devices, 0, tokens[e]});
  return pieces;
}

// Greedy's jobs: each expert with rows, whole, or (greedy_split) cut into k contiguous near-equal pieces when it
// holds more than the fair share ceil(total / D) of the rows; k = min(D, ceil(rows / fair)), lowered until the
// smallest piece floor(rows / k) is at least min_tokens. Listed in expert order, then by begin.
struct Job {
  int expert;
  int32_t begin, count;
  double cost;
};

std::vector<Job> greedy_jobs(const PlacementConfig& cfg, const std::vector<int32_t>& tokens, const ExpertCostModel& cost) {
  const int64_t D = cfg.devices;
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t(0));
  const int64_t fair = (total + D - 1) / D;
  std::vector<Job> jobs;
  for (int e = 0; e < (int)tokens.size(); ++e) {
    const int64_t rows = tokens[e];
    if (rows == 0) continue;
    int64_t k = 1;
    if (cfg.greedy_split && rows > fair) {
      k = std::min(D, (rows + fair - 1) / fair);
      while (k > 1 && rows / k < cfg.min_tokens) --k;
    }
    for (int64_t i = 0; i < k; ++i) {
      const int64_t begin = rows * i / k, count = rows * (i + 1) / k - begin;
      jobs.push_back({e, int32_t(begin), int32_t(count), std::max(cost.upload_ms_per_expert, count * cost.compute_ms_per_token)});
    }
  }
  return jobs;
}

struct Schedule {
  std::vector<ExpertPiece> pieces;
  double makespan = 0;  // the largest accumulated cost of a device
};

Schedule list_schedule(const PlacementConfig& cfg, const std::vector<int32_t>& tokens, const ExpertCostModel& cost) {
  std::vector<Job> jobs = greedy_jobs(cfg, tokens, cost);
  // Stable: equal costs keep expert order, then begin order.
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.cost > b.cost; });
  std::vector<double> device_cost(cfg.devices, 0.0);
  std::vector<std::vector<int>> held(tokens.size());  // devices already holding a piece of the expert
  Schedule out;
  for (const Job& job : jobs) {
    // An expert has at most D pieces, so some device is always free of it.
    const std::vector<int>& taken = held[job.expert];
    int d = -1;
    for (int c = 0; c < cfg.devices; ++c)
      if (std::find(taken.begin(), taken.end(), c) == taken.end() && (d < 0 || device_cost[c] < device_cost[d])) d = c;
    device_cost[d] += job.cost;
    held[job.expert].push_back(d);
    out.pieces.push_back({job.expert, d, job.begin, job.count});
  }
  out.makespan = *std::max_element(device_cost.begin(), device_cost.end());
  std::sort(out.pieces.begin(), out.pieces.end(), [](const ExpertPiece& a, const ExpertPiece& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.begin < b.begin;
  });
  return out;
}

// With greedy_split, the split schedule is kept only when its makespan beats the whole-expert one: cutting can
// lose (every piece pays its own upload, and one piece per device constrains LPT), and keeping the better of
// the two keeps Graham's bound against the whole-expert optimum.
std::vector<ExpertPiece> greedy_pieces(const PlacementConfig& cfg, const std::vector<int32_t>& tokens,
                                       const ExpertCostModel& cost) {
  PlacementConfig whole_cfg = cfg;
  whole_cfg.greedy_split = false;
  Schedule whole = list_schedule(whole_cfg, tokens, cost);
  if (!cfg.greedy_split) return std::move(whole.pieces);
  Schedule split = list_schedule(cfg, tokens, cost);
  return split.makespan < whole.makespan ? std::move(split.pieces) : std::move(whole.pieces);
}

// The state LLEP's donors share: loads as spilled so far, and rows [0, at_home[e]) still on e's home.
struct Spill {
  const PlacementConfig& cfg;
  std::vector<int64_t> load;
  std::vector<bool> receiver;
  std::vector<int32_t> at_home;
  int64_t cap = 0;
  std::vector<ExpertPiece> spilled;

  int least_loaded_receiver() const {
    int best = -1;
    for (int d = 0; d < cfg.devices; ++d)
      if (receiver[d] && (best < 0 || load[d] < load[best])) best = d;
    return best;
  }

  void shed(int donor, int64_t excess, const std::vector<int>& experts_by_tokens) {
    for (int e : experts_by_tokens) {
      if (e % cfg.devices != donor) continue;
      while (excess >= cfg.min_tokens) {
        const int to = least_loaded_receiver();
        const int64_t room = cap - load[to];
        if (room < cfg.min_tokens) return;
        const int64_t rest = at_home[e], want = std::min(excess, room);
        const int64_t rows = want >= rest ? rest : std::min(want, rest - cfg.min_tokens);
        if (rows < cfg.min_tokens) break;
        at_home[e] -= int32_t(rows);
        spilled.push_back({e, to, at_home[e], int32_t(rows)});
        load[donor] -= rows;
        load[to] += rows;
        excess -= rows;
      }
    }
  }
};

std::vector<ExpertPiece> least_loaded_pieces(const PlacementConfig& cfg, const std::vector<int32_t>& tokens,
                                             const std::vector<int64_t>& load_before, double imbalance_before) {
  if (imbalance_before <= cfg.lambda) return static_pieces(tokens, cfg.devices);
  // Past here some device is above the mean, so another is below it: there is always a receiver.
  const double mean = double(std::accumulate(load_before.begin(), load_before.end(), int64_t(0))) / cfg.devices;
  Spill spill{cfg, load_before, std::vector<bool>(cfg.devices), tokens, int64_t(std::floor(cfg.alpha * mean)), {}};
  for (int d = 0; d < cfg.devices; ++d) spill.receiver[d] = load_before[d] <= mean;
  const std::vector<int> experts_by_tokens = by_descending(tokens);
  for (int donor : by_descending(load_before))
    if (!spill.receiver[donor]) spill.shed(donor, load_before[donor] - int64_t(std::ceil(mean)), experts_by_tokens);

  std::vector<ExpertPiece> pieces = std::move(spill.spilled);
  for (int e = 0; e < (int)tokens.size(); ++e)
    if (spill.at_home[e] > 0) pieces.push_back({e, e % cfg.devices, 0, spill.at_home[e]});
  std::sort(pieces.begin(), pieces.end(), [](const ExpertPiece& a, const ExpertPiece& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.begin < b.begin;
  });
  return pieces;
}

std::vector<int64_t> device_loads(const std::vector<ExpertPiece>& pieces, int devices) {
  std::vector<int64_t> load(devices, 0);
  for (const ExpertPiece& p : pieces) load[p.device] += p.count;
  return load;
}

double imbalance(const std::vector<int64_t>& load) {
  const int64_t total = std::accumulate(load.begin(), load.end(), int64_t(0));
  if (total == 0) return 1.0;
  return double(*std::max_element(load.begin(), load.end())) * double(load.size()) / double(total);
}

}  // namespace

Placement place_experts(const PlacementConfig& cfg, const std::vector<int32_t>& tokens_per_expert,
                        const ExpertCostModel& cost) {
  validate(cfg, tokens_per_expert, cost);
  const int D = cfg.devices;
  Placement out;
  for (int e = 0; e < (int)tokens_per_expert.size(); ++e) out.home.push_back(e % D);
  out.load_before = device_loads(static_pieces(tokens_per_expert, D), D);
  out.imbalance_before = imbalance(out.load_before);
  switch (cfg.policy) {
    case PlacementPolicy::Static: out.pieces = static_pieces(tokens_per_expert, D); break;
    case PlacementPolicy::Greedy: out.pieces = greedy_pieces(cfg, tokens_per_expert, cost); break;
    case PlacementPolicy::LeastLoaded:
      out.pieces = least_loaded_pieces(cfg, tokens_per_expert, out.load_before, out.imbalance_before);
      break;
  }
  out.load_after = device_loads(out.pieces, D);
  out.imbalance_after = imbalance(out.load_after);
  // Each policy puts at most one piece of an expert on a device, so a piece away from home is one weight copy.
  for (const ExpertPiece& p : out.pieces)
    if (p.device != out.home[p.expert]) {
      out.spilled_tokens += p.count;
      ++out.moved_experts;
    }
  return out;
}

const char* placement_policy_name(PlacementPolicy p) {
  return p == PlacementPolicy::Static ? "static" : p == PlacementPolicy::Greedy ? "greedy" : "least-loaded";
}

}  // namespace moe
