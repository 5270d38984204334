// Timing helpers shared by the benchmark subcommands: medians of repeated runs after a warm-up.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of fn() after one warm-up call; enough reps for ~0.3 s of timing, between 3 and 15. A call of over a
// second is timed once, its warm-up being lost in it (as test/bench/engine_peers.py times PyTorch).
template <class Fn>
double time_median(Fn&& fn) {
  auto t0 = Clock::now();
  fn();
  const double first = seconds_since(t0);
  if (first > 1.0) return first;
  const int reps = std::clamp(static_cast<int>(0.3 / std::max(first, 1e-9)), 3, 15);
  std::vector<double> t(reps);
  for (auto& s : t) {
    t0 = Clock::now();
    fn();
    s = seconds_since(t0);
  }
  return median(t);
}

}  // namespace bench
