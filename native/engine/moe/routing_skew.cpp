#include "moe/routing_skew.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace moe {

void draw_skewed_routing(const RoutingSkew& skew, uint64_t draw, int layer, int N, int E, int K, int32_t* out) {
  check(skew.distribution != SkewDistribution::None, "routing skew: no distribution configured");
  check(K <= E, "routing skew: top_k exceeds the experts of a layer");
  // Zipf: cumulative weights of ranks 0..E-1 (expert e has rank e, so expert 0 is the hottest).
  std::vector<double> cdf(E);
  double total = 0;
  for (int e = 0; e < E; ++e) {
    total += skew.distribution == SkewDistribution::Zipf ? 1.0 / std::pow(e + 1.0, skew.zipf_s) : 1.0;
    cdf[e] = total;
  }
  const uint64_t stream = (draw << 16) ^ static_cast<uint64_t>(layer);
  for (int n = 0; n < N; ++n) {
    int32_t* picked = out + static_cast<size_t>(n) * K;
    uint64_t counter = static_cast<uint64_t>(n) << 20;
    auto uniform = [&] { return static_cast<double>(random_uniform(skew.seed, stream, counter++)); };
    for (int k = 0; k < K; ++k) {
      int e = -1;
      if (k == 0 && skew.distribution == SkewDistribution::Hot && uniform() <= skew.hot_fraction) e = 0;
      // Draw until the expert is new to this token (K ≤ E, so this ends; K is small).
      while (e < 0 || std::find(picked, picked + k, e) != picked + k) {
        if (skew.distribution == SkewDistribution::Hot) {
          // The remaining choices spread uniformly over the other experts.
          e = 1 + std::min(E - 2, static_cast<int>(uniform() * (E - 1)));
          if (E == 1) e = 0;
        } else {
          const double u = uniform() * total;
          e = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
          e = std::min(e, E - 1);
        }
      }
      picked[k] = e;
    }
  }
}

}  // namespace moe
