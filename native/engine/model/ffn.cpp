#include "model/ffn.h"

#include <algorithm>
#include <utility>

#include "model/linear.h"

namespace moe {

namespace {

// The run's in-projections (in_proj) or out-projections as grouped linear layers.
LinearGroups linears(const std::vector<FfnSegment>& run, bool in_proj) {
  LinearGroups g;
  for (const FfnSegment& s : run) {
    if (in_proj) g.add(s.row0, s.rows, s.w.w_in, s.w.w_in_bf16, s.w.b_in, s.g.w_in, s.g.b_in);
    else g.add(s.row0, s.rows, s.w.w_out, s.w.w_out_bf16, s.w.b_out, s.g.w_out, s.g.b_out);
  }
  return g;
}

// The run's rows as maximal contiguous stretches (first row, row count), in row order: the row-wise ops
// (activations, clears) run once per stretch.
std::vector<std::pair<int64_t, int64_t>> stretches(const std::vector<FfnSegment>& run) {
  std::vector<std::pair<int64_t, int64_t>> parts;
  for (const FfnSegment& s : run)
    if (s.rows > 0) parts.push_back({s.row0, s.rows});
  std::sort(parts.begin(), parts.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& p : parts) {
    if (!merged.empty() && merged.back().first + merged.back().second == p.first) merged.back().second += p.second;
    else merged.push_back(p);
  }
  return merged;
}

}  // namespace

void ffn_hidden_forward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, const float* x, float* h,
                        float* act) {
  const int IR = s.in_rows();
  be.grouped_matmul_forward(h, x, linears(run, true), s.C, IR);
  for (const FfnSegment& seg : run) {
    if (seg.rows <= 0) continue;
    float* hs = h + seg.row0 * IR;
    const float* xs = x + seg.row0 * s.C;
    lora_forward(be, seg.w.lora_in[0], hs, xs, seg.rows, s.C, s.F, IR);
    lora_forward(be, seg.w.lora_in[1], hs + s.F, xs, seg.rows, s.C, s.F, IR);
  }
  for (const auto& [r0, n] : stretches(run)) {
    const float* hs = h + r0 * IR;
    float* as = act + r0 * s.F;
    switch (s.activation) {
      case FfnActivation::Swiglu: be.swiglu_forward(as, hs, (int)n, s.F); break;
      case FfnActivation::SwigluClamped:
        be.swiglu_clamped_forward(as, hs, (int)n, s.F, s.swiglu_alpha, s.swiglu_limit);
        break;
      case FfnActivation::Gelu: be.gelu_forward(as, hs, n * s.F); break;
    }
  }
}

void ffn_forward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, float* y, const float* x,
                 float* h, float* act) {
  ffn_hidden_forward(be, run, s, x, h, act);
  be.grouped_matmul_forward(y, act, linears(run, false), s.F, s.C);
  for (const FfnSegment& seg : run)
    if (seg.rows > 0)
      lora_forward(be, seg.w.lora_out, y + seg.row0 * s.C, act + seg.row0 * s.F, seg.rows, s.F, s.C, s.C);
}

void ffn_backward(Backend& be, const std::vector<FfnSegment>& run, const FfnShape& s, float* dx, const float* dy,
                  const float* x, const float* h, const float* act, float* dh, float* dact) {
  const int IR = s.in_rows();
  // dact and dh hold nothing else's gradient: they are written, where a backend can, rather than cleared and then
  // added onto (a pass over each, and a read of each in the pass that adds).
  be.grouped_matmul_backward_write_dx(dact, dy, act, linears(run, false), s.F, s.C);
  for (const FfnSegment& seg : run)
    if (seg.rows > 0)
      lora_backward(be, seg.w.lora_out, seg.g.lora_out, dact + seg.row0 * s.F, dy + seg.row0 * s.C,
                    act + seg.row0 * s.F, seg.rows, s.F, s.C, s.C);
  for (const auto& [r0, n] : stretches(run)) {
    float* dhs = dh + r0 * IR;
    const float* hs = h + r0 * IR;
    const float* das = dact + r0 * s.F;
    const size_t bytes = sizeof(float) * n * IR;
    switch (s.activation) {
      case FfnActivation::Swiglu: be.swiglu_backward_write(dhs, das, hs, (int)n, s.F); break;
      case FfnActivation::SwigluClamped:
        be.zero(dhs, bytes);
        be.swiglu_clamped_backward(dhs, das, hs, (int)n, s.F, s.swiglu_alpha, s.swiglu_limit);
        break;
      case FfnActivation::Gelu:
        be.zero(dhs, bytes);
        be.gelu_backward(dhs, hs, das, n * s.F);
        break;
    }
  }
  be.grouped_matmul_backward(dx, dh, x, linears(run, true), s.C, IR);
  for (const FfnSegment& seg : run) {
    if (seg.rows <= 0) continue;
    float* dxs = dx + seg.row0 * s.C;
    const float* dhs = dh + seg.row0 * IR;
    const float* xs = x + seg.row0 * s.C;
    lora_backward(be, seg.w.lora_in[0], seg.g.lora_in[0], dxs, dhs, xs, seg.rows, s.C, s.F, IR);
    lora_backward(be, seg.w.lora_in[1], seg.g.lora_in[1], dxs, dhs + s.F, xs, seg.rows, s.C, s.F, IR);
  }
}

}  // namespace moe
