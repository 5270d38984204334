// Seeded routing for controlled load-balance experiments (as LLEP and megablocks run them): each token's K
// distinct experts are drawn from a distribution instead of taken from the router's top-k. Draws depend only on
// (seed, draw, layer, token, k), so a run is reproducible and any two strategies see the same routing.
#pragma once
#include <cstdint>

#include "model/config.h"

namespace moe {

// out[N,K]: distinct experts per token. draw numbers the forward pass (the trainer uses step × micro-batches +
// micro-batch), layer the model layer.
void draw_skewed_routing(const RoutingSkew& skew, uint64_t draw, int layer, int N, int E, int K, int32_t* out);

}  // namespace moe
