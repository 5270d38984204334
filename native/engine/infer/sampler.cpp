#include "infer/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/rng.h"

namespace moe {
namespace {
constexpr uint64_t kSamplingStream = 0x5A3D1E;  // keeps draws apart from every other use of the seed
}

void check_sampling(const SamplingOptions& o) {
  check(std::isfinite(o.temperature) && o.temperature >= 0,
        "sampling.temperature must be >= 0 (got " + std::to_string(o.temperature) + ")");
  check(o.top_k >= 0, "sampling.top_k must be >= 0 (got " + std::to_string(o.top_k) + ")");
  check(o.top_p > 0 && o.top_p <= 1, "sampling.top_p must be in (0, 1] (got " + std::to_string(o.top_p) + ")");
}

int32_t sample_token(const float* logits, int V, const SamplingOptions& o, uint64_t draw) {
  if (o.temperature == 0) return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  // Ties keep the lower id first, so the candidate order is a function of the logits alone.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::vector<double> p(k);
  const double top = logits[order[0]];
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += (p[i] = std::exp((logits[order[i]] - top) / o.temperature));
  int keep = k;
  if (o.top_p < 1) {
    double mass = 0;
    for (int i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int i = 0; i < keep; ++i) total += p[i];
  const double u = random_uniform(o.seed, kSamplingStream, draw) * total;
  double acc = 0;
  for (int i = 0; i < keep; ++i) {
    acc += p[i];
    if (u <= acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace moe
