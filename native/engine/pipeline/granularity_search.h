// How many micro-batches n to split an MoE layer's B tokens into (pipelining): MPipeMoE's Algorithm 1,
// adaptive pipeline granularity search. Trials are costly (each runs the layer at several n) and B changes every
// step, so the search leans on the paper's hypothesis that the best n grows with B: the B domain is a set S of
// disjoint ranges, each mapped to one n, and only a B outside every range pays for a trial. Pure bookkeeping:
// the trial itself is the caller's (no threads, no backend).
//
// choose(B), lines 1-18 of Algorithm 1:
//   1. cache_table hit: return it.
//   2. find(S, B): the range containing B gives n.
//   3. Otherwise n = trial(B) (searchBestGran), then B joins S: merged into a range of n by min/max, or
//      inserted as (B, B) when n has none. cache_table[B] = n in every case.
// Merging only ever happens with B's immediate neighbours in S (the nearest range below B and the nearest above),
// so S stays disjoint and sorted. When the trials are monotone this is exactly the paper's merge: any range of
// n is an immediate neighbour of B (a range between them would need an n' both ≤ n and ≥ n). When they are not,
// a range of n beyond another n' range is left alone and B gets a new range (B, B) of its own: one n may then own
// several ranges, and the n of a range is what its own trials said, monotone in B only if they were.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace moe {

class GranularitySearch {
 public:
  // trial(B) runs searchBestGran for token count B and returns the best n (≥ 1), e.g. via best_granularity.
  explicit GranularitySearch(std::function<int(int64_t B)> trial);

  // The partition count for B tokens (B ≥ 1, else EngineError naming pipeline.B).
  int choose(int64_t B);

  struct Range {
    int64_t lower, upper;  // inclusive
    int n;
    bool operator==(const Range&) const = default;
  };
  std::vector<Range> ranges() const;  // S, disjoint, sorted by lower
  int trials() const { return trials_; }

 private:
  std::function<int(int64_t)> trial_;
  std::map<int64_t, Range> ranges_;  // keyed by lower: the paper's binary search tree, O(log |S|) find and insert
  std::unordered_map<int64_t, int> cache_;
  int trials_ = 0;

  void add(int64_t B, int n);
};

// searchBestGran's decision: the n in `candidates` with the lowest measure_ms(n), ties to the smaller n. Each
// candidate is measured once, in the given order. Errors name pipeline.candidates or pipeline.measure_ms.
int best_granularity(const std::vector<int>& candidates, const std::function<double(int n)>& measure_ms);

}  // namespace moe
