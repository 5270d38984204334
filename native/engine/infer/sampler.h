// Picks the next token from one position's logits: temperature 0 is greedy (the first largest logit); otherwise
// softmax(logits / temperature) restricted to the top_k most likely tokens (0: all) and then to the smallest set
// whose probability reaches top_p (1: all), renormalised, drawn with a uniform number that depends only on
// (seed, draw), so a seed replays the same tokens.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

struct SamplingOptions {
  double temperature = 0.0;
  int top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
};

// Throws naming the option when one is out of range.
void check_sampling(const SamplingOptions& o);
int32_t sample_token(const float* logits, int V, const SamplingOptions& o, uint64_t draw);

}  // namespace moe
