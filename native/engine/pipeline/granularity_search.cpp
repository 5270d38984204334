#include "pipeline/granularity_search.h"

#include <cmath>
#include <iterator>
#include <string>
#include <utility>

#include "core/error.h"

namespace moe {

GranularitySearch::GranularitySearch(std::function<int(int64_t)> trial) : trial_(std::move(trial)) {
  check(bool(trial_), "pipeline.trial: needs a search-by-trials function");
}

int GranularitySearch::choose(int64_t B) {
  check(B >= 1, "pipeline.B: the token count must be at least 1, got " + std::to_string(B));
  if (auto hit = cache_.find(B); hit != cache_.end()) return hit->second;
  // find(S, B): the last range starting at or before B contains B when it reaches B.
  auto after = ranges_.upper_bound(B);
  if (after != ranges_.begin() && std::prev(after)->second.upper >= B) return cache_[B] = std::prev(after)->second.n;
  const int n = trial_(B);
  ++trials_;
  check(n >= 1, "pipeline.n: the trial for B = " + std::to_string(B) + " returned " + std::to_string(n) +
                    ", must be at least 1");
  add(B, n);
  return cache_[B] = n;
}

// Lines 9-16 for a B outside every range: merge into a neighbouring range of n, else insert (B, B). Adjacent
// ranges never share an n (each insert and merge below keeps it so), so at most one of B's two neighbours is n's.
void GranularitySearch::add(int64_t B, int n) {
  auto above = ranges_.upper_bound(B);
  if (above != ranges_.end() && above->second.n == n) {
    auto node = ranges_.extract(above);  // the key is the lower bound, which moves down to B
    node.key() = node.mapped().lower = B;
    ranges_.insert(std::move(node));
  } else if (above != ranges_.begin() && std::prev(above)->second.n == n) {
    std::prev(above)->second.upper = B;
  } else {
    ranges_.emplace(B, Range{B, B, n});
  }
}

std::vector<GranularitySearch::Range> GranularitySearch::ranges() const {
  std::vector<Range> out;
  out.reserve(ranges_.size());
  for (const auto& [lower, range] : ranges_) out.push_back(range);
  return out;
}

int best_granularity(const std::vector<int>& candidates, const std::function<double(int)>& measure_ms) {
  check(!candidates.empty(), "pipeline.candidates: needs at least one partition count");
  int best = 0;
  double best_ms = 0;
  for (int n : candidates) {
    check(n >= 1, "pipeline.candidates: each partition count must be at least 1, got " + std::to_string(n));
    const double ms = measure_ms(n);
    // Written so that NaN fails too.
    check(ms >= 0 && std::isfinite(ms),
          "pipeline.measure_ms: the time for n = " + std::to_string(n) + " must be a non-negative finite number");
    if (best == 0 || ms < best_ms || (ms == best_ms && n < best)) {
      best = n;
      best_ms = ms;
    }
  }
  return best;
}

}  // namespace moe
