// Shared by the tests of generation sessions through the C API.
#pragma once
#include <cstdint>
#include <vector>

#include "moe_engine.h"
#include "testing.h"

namespace moe_test {

// Feeds the prompt to an open session, then returns up to n sampled tokens (fewer once max_seq_len is reached).
inline std::vector<int32_t> session_tokens(moe_generation* g, const std::vector<int32_t>& prompt, size_t n) {
  std::vector<int32_t> out;
  CHECK(moe_generation_feed(g, prompt.data(), (int32_t)prompt.size()) == MOE_OK);
  for (size_t i = 0; i < n; ++i) {
    moe_generated_token t{};
    t.struct_size = sizeof t;
    if (moe_generation_step(g, &t) != MOE_OK) break;
    out.push_back(t.token);
  }
  return out;
}

}  // namespace moe_test
