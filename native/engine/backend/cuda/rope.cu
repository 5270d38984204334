// Rotary position embedding (RopeSpec, backend/types.h). One thread per rotated pair (so in-place calls are
// safe) and one per copied element. Angles, cos and sin are computed in double and rounded once, as the CPU's
// table is, so the factors agree with the CPU's to the last bit or one ulp.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

struct RopeArgs {
  int T, dim, half, heads, row, first_step, second_off;
  double theta, scale;
  const double* inv_freq;
};

template <bool kBackward>
__global__ void rope_kernel(float* dst, const float* src, int64_t rows, RopeArgs a) {
  const int pairs = a.heads * a.half, per_row = pairs + (a.row - a.heads * a.dim);
  const float sign = kBackward ? -1.0f : 1.0f;
  MOE_CUDA_FOR(w, rows * per_row) {
    const int64_t n = w / per_row;
    const int j = (int)(w % per_row);
    const float* x = src + n * a.row;
    float* y = dst + n * a.row;
    if (j >= pairs) {
      const int e = a.heads * a.dim + (j - pairs);
      y[e] = kBackward ? y[e] + x[e] : x[e];
      continue;
    }
    const int h = j / a.half, i = j % a.half;
    const double f = a.inv_freq ? a.inv_freq[i] : pow(a.theta, -2.0 * i / a.dim);
    const double angle = (double)(n % a.T) * f;
    const float c = (float)(a.scale == 1.0 ? cos(angle) : cos(angle) * a.scale);
    const float s = (float)(a.scale == 1.0 ? sin(angle) : sin(angle) * a.scale);
    const int p = h * a.dim + i * a.first_step, q = p + a.second_off;
    const float x1 = x[p], x2 = x[q];
    const float y1 = x1 * c - sign * x2 * s, y2 = x2 * c + sign * x1 * s;
    if (kBackward) y[p] += y1, y[q] += y2;
    else y[p] = y1, y[q] = y2;
  }
}

RopeArgs args(int T, const RopeSpec& spec) {
  const bool inter = spec.layout == RopeLayout::Interleaved;
  return {T, spec.dim, spec.dim / 2, spec.heads, spec.row, inter ? 2 : 1, inter ? 1 : spec.dim / 2,
          (double)spec.theta, spec.scale, spec.inv_freq};
}

template <bool kBackward>
void rope(cudaStream_t s, float* dst, const float* src, int B, int T, const RopeSpec& spec) {
  const RopeArgs a = args(T, spec);
  const int64_t work = (int64_t)B * T * (a.heads * a.half + (a.row - a.heads * a.dim));
  if (work > 0) rope_kernel<kBackward><<<blocks_for(work), kThreads, 0, s>>>(dst, src, (int64_t)B * T, a);
}

}  // namespace

void rope_forward(cudaStream_t s, float* out, const float* inp, int B, int T, const RopeSpec& spec) {
  rope<false>(s, out, inp, B, T, spec);
}

void rope_backward(cudaStream_t s, float* dinp, const float* dout, int B, int T, const RopeSpec& spec) {
  rope<true>(s, dinp, dout, B, T, spec);
}

}  // namespace moe::cuda
