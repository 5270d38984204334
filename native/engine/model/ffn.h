// One feed-forward block (dense MLP, expert, shared expert or PR-MoE residual):
//   gpt-moe: y = proj(gelu(fc(x)))      mixtral: y = down(silu(gate(x)) · up(x))
// and a run of such blocks, each with its own weights, over consecutive row segments of one activation (an MoE
// layer's experts on their permuted tokens): each linear of every block of the run is one grouped op
// (Backend::grouped_matmul_*) and each activation one op per contiguous stretch of rows, with the same results,
// bit for bit, as one block at a time.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/features.h"
#include "model/params.h"

namespace moe {

struct FfnShape {
  int C = 0, F = 0;
  FfnActivation activation = FfnActivation::Gelu;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;  // SwigluClamped only
  bool gated() const { return activation == FfnActivation::Swiglu || activation == FfnActivation::SwigluClamped; }
  int in_rows() const { return gated() ? 2 * F : F; }  // width of the in-projection's output
};

// One block of a run: rows [row0, row0 + rows) of every activation pointer passed with the run, its weights w and
// (backward) where its gradients accumulate, g (null members: frozen).
struct FfnSegment {
  int64_t row0 = 0;
  int rows = 0;
  FfnParams w, g;
};

// h [rows, in_rows] and act [rows, F] are saved for backward.
// The first half of ffn_forward: the in-projection and activation (also what memory reuse S3/S4 recompute).
void ffn_hidden_forward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, const float* x, float* h,
                        float* act);
void ffn_forward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, float* y, const float* x,
                 float* h, float* act);
// dx += ∂/∂x, each segment's g += ∂/∂ its params. dh [rows, in_rows] and dact [rows, F] are scratch covering the
// run's rows (up to the end of its last segment).
void ffn_backward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, float* dx, const float* dy,
                  const float* x, const float* h, const float* act, float* dh, float* dact);

// One block on N rows.
inline void ffn_hidden_forward(Backend& be, const FfnParams& p, const FfnShape& s, const float* x, float* h,
                               float* act, int N) {
  ffn_hidden_forward(be, {FfnSegment{0, N, p, {}}}, s, x, h, act);
}
inline void ffn_forward(Backend& be, const FfnParams& p, const FfnShape& s, float* y, const float* x, float* h,
                        float* act, int N) {
  ffn_forward(be, {FfnSegment{0, N, p, {}}}, s, y, x, h, act);
}
inline void ffn_backward(Backend& be, const FfnParams& p, const FfnParams& grads, const FfnShape& s, float* dx,
                         const float* dy, const float* x, const float* h, const float* act, float* dh, float* dact,
                         int N) {
  ffn_backward(be, {FfnSegment{0, N, p, grads}}, s, dx, dy, x, h, act, dh, dact);
}

}  // namespace moe
