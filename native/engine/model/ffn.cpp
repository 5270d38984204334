#include "model/ffn.h"

#include "model/linear.h"

namespace moe {

void ffn_hidden_forward(Backend& be, const FfnParams& p, const FfnShape& s, const float* x, float* h, float* act,
                        int N) {
  if (N == 0) return;
  linear_forward(be, h, x, p.w_in, p.w_in_bf16, p.b_in, N, s.C, s.in_rows());
  lora_forward(be, p.lora_in[0], h, x, N, s.C, s.F, s.in_rows());
  lora_forward(be, p.lora_in[1], h + s.F, x, N, s.C, s.F, s.in_rows());
  switch (s.activation) {
    case FfnActivation::Swiglu: be.swiglu_forward(act, h, N, s.F); break;
    case FfnActivation::SwigluClamped: be.swiglu_clamped_forward(act, h, N, s.F, s.swiglu_alpha, s.swiglu_limit); break;
    case FfnActivation::Gelu: be.gelu_forward(act, h, static_cast<int64_t>(N) * s.F); break;
  }
}

void ffn_forward(Backend& be, const FfnParams& p, const FfnShape& s, float* y, const float* x, float* h, float* act,
                 int N) {
  if (N == 0) return;
  ffn_hidden_forward(be, p, s, x, h, act, N);
  linear_forward(be, y, act, p.w_out, p.w_out_bf16, p.b_out, N, s.F, s.C);
  lora_forward(be, p.lora_out, y, act, N, s.F, s.C, s.C);
}

void ffn_backward(Backend& be, const FfnParams& p, const FfnParams& grads, const FfnShape& s, float* dx,
                  const float* dy, const float* x, const float* h, const float* act, float* dh, float* dact, int N) {
  if (N == 0) return;
  be.zero(dact, sizeof(float) * N * s.F);
  linear_backward(be, dact, grads.w_out, grads.b_out, dy, act, p.w_out, p.w_out_bf16, N, s.F, s.C);
  lora_backward(be, p.lora_out, grads.lora_out, dact, dy, act, N, s.F, s.C, s.C);
  be.zero(dh, sizeof(float) * N * s.in_rows());
  switch (s.activation) {
    case FfnActivation::Swiglu: be.swiglu_backward(dh, dact, h, N, s.F); break;
    case FfnActivation::SwigluClamped:
      be.swiglu_clamped_backward(dh, dact, h, N, s.F, s.swiglu_alpha, s.swiglu_limit);
      break;
    case FfnActivation::Gelu: be.gelu_backward(dh, h, dact, static_cast<int64_t>(N) * s.F); break;
  }
  linear_backward(be, dx, grads.w_in, grads.b_in, dh, x, p.w_in, p.w_in_bf16, N, s.C, s.in_rows());
  lora_backward(be, p.lora_in[0], grads.lora_in[0], dx, dh, x, N, s.C, s.F, s.in_rows());
  lora_backward(be, p.lora_in[1], grads.lora_in[1], dx, dh + s.F, x, N, s.C, s.F, s.in_rows());
}

}  // namespace moe
