#include "backend/cpu/clamp.h"

#include <algorithm>

namespace moe::cpu {

void clamp_forward(ThreadPool& tp, float* out, const float* inp, int64_t n, float limit) {
  tp.parallel_for(n, [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) out[i] = std::min(std::max(inp[i], -limit), limit);
  });
}

void clamp_backward(ThreadPool& tp, float* dinp, const float* dout, const float* inp, int64_t n, float limit) {
  tp.parallel_for(n, [=](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i)
      if (inp[i] >= -limit && inp[i] <= limit) dinp[i] += dout[i];
  });
}

}  // namespace moe::cpu
