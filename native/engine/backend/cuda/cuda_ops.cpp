// The CUDA backend's dense ops: each stages its arguments (Stage, runtime.h: any pointer kind works), enqueues
// the kernels of kernels.h on the backend's stream and waits for them. Waiting per op keeps the contract's
// synchronous semantics in this first version; overlapping ops is left for later.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"

namespace moe {

using cuda::Stage;
using cuda::sz;

namespace {

// Elements of an [N, O] block whose rows are ld apart.
size_t strided(int N, int O, int ld) { return N > 0 && O > 0 ? (size_t)(N - 1) * ld + O : 0; }

int qkv_width(int NH, int NKV, int HS) { return (NH + 2 * NKV) * HS; }

// The spec with its frequency table where the device can read it.
RopeSpec staged(Stage& st, const RopeSpec& spec) {
  RopeSpec s = spec;
  s.inv_freq = st.in(spec.inv_freq, sz(spec.dim / 2));
  return s;
}

// Rows [0, end) of the activations a grouped call reads or writes.
int64_t rows_spanned(const LinearGroups& g) {
  int64_t end = 0;
  for (int i = 0; i < g.size(); ++i)
    if (g.rows[i] > 0) end = std::max(end, g.row0[i] + g.rows[i]);
  return end;
}

// 1 when every group with rows computes on a bf16 weight, 0 when all on fp32, -1 when mixed.
int bf16_groups(const LinearGroups& g) {
  int bf16 = 0, fp32 = 0;
  for (int i = 0; i < g.size(); ++i)
    if (g.rows[i] > 0) (g.w_bf16[i] ? bf16 : fp32)++;
  return bf16 && fp32 ? -1 : bf16 > 0;
}

// The groups' parameters where the device can reach them (gradients only for backward).
LinearGroups staged(Stage& st, const LinearGroups& g, int I, int O, bool backward) {
  LinearGroups d = g;
  for (int i = 0; i < g.size(); ++i) {
    d.w[i] = st.in(g.w[i], g.w_bf16[i] ? 0 : sz(O, I));
    d.w_bf16[i] = st.in(g.w_bf16[i], sz(O, I));
    d.b[i] = st.in(g.b[i], sz(O));
    d.dw[i] = backward ? st.inout(g.dw[i], sz(O, I)) : nullptr;
    d.db[i] = backward ? st.inout(g.db[i], sz(O)) : nullptr;
  }
  return d;
}

}  // namespace

// One group, or groups mixing fp32 and bf16 weights, take the plain matmuls.
void CudaBackend::grouped_matmul_forward(float* y, const float* x, const LinearGroups& g, int I, int O) {
  const int bf16 = bf16_groups(g);
  if (bf16 < 0 || g.size() <= 1) return Backend::grouped_matmul_forward(y, x, g, I, O);
  Stage st(stream_, __func__);
  const int64_t R = rows_spanned(g);
  const LinearGroups d = staged(st, g, I, O, false);
  cuda::grouped_matmul_forward(st, blas_.get(), st.inout(y, sz(R, O)), st.in(x, sz(R, I)), d, I, O, bf16 == 1);
  st.finish();
}

void CudaBackend::grouped_matmul_backward(float* dx, const float* dy, const float* x, const LinearGroups& g, int I,
                                          int O) {
  const int bf16 = bf16_groups(g);
  if (bf16 < 0 || g.size() <= 1) return Backend::grouped_matmul_backward(dx, dy, x, g, I, O);
  Stage st(stream_, __func__);
  const int64_t R = rows_spanned(g);
  const LinearGroups d = staged(st, g, I, O, true);
  cuda::grouped_matmul_backward(st, blas_.get(), st.inout(dx, sz(R, I)), st.in(dy, sz(R, O)), st.in(x, sz(R, I)), d,
                                I, O, bf16 == 1);
  st.finish();
}

void CudaBackend::matmul_forward(float* y, const float* x, const float* w, const float* b, int N, int I, int O) {
  Stage st(stream_, __func__);
  cuda::matmul_forward(stream_, blas_.get(), st.out(y, sz(N, O)), st.in(x, sz(N, I)), st.in(w, sz(O, I)),
                       st.in(b, sz(O)), N, I, O);
  st.finish();
}

void CudaBackend::matmul_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                                  int N, int I, int O) {
  Stage st(stream_, __func__);
  cuda::matmul_backward(stream_, blas_.get(), st.inout(dx, sz(N, I)), st.inout(dw, sz(O, I)), st.inout(db, sz(O)),
                        st.in(dy, sz(N, O)), st.in(x, sz(N, I)), st.in(w, sz(O, I)), N, I, O);
  st.finish();
}

void CudaBackend::matmul_forward_bf16(float* y, const float* x, const uint16_t* w, const float* b, int N, int I,
                                      int O) {
  Stage st(stream_, __func__);
  cuda::matmul_forward_bf16(stream_, blas_.get(), st.out(y, sz(N, O)), st.in(x, sz(N, I)), st.in(w, sz(O, I)),
                            st.in(b, sz(O)), N, I, O);
  st.finish();
}

void CudaBackend::matmul_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x,
                                       const uint16_t* w, int N, int I, int O) {
  Stage st(stream_, __func__);
  cuda::matmul_backward_bf16(stream_, blas_.get(), st.inout(dx, sz(N, I)), st.inout(dw, sz(O, I)),
                             st.inout(db, sz(O)), st.in(dy, sz(N, O)), st.in(x, sz(N, I)), st.in(w, sz(O, I)), N, I,
                             O);
  st.finish();
}

void CudaBackend::to_bf16(uint16_t* dst, const float* src, int64_t n) {
  Stage st(stream_, __func__);
  cuda::to_bf16(stream_, st.out(dst, sz(n)), st.in(src, sz(n)), n);
  st.finish();
}

void CudaBackend::lora_forward(float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                               float scale, int ldy, const LoraDropoutMask& drop) {
  Stage st(stream_, __func__);
  cuda::lora_forward(stream_, st.inout(y, strided(N, O, ldy)), st.in(x, sz(N, I)), st.in(A, sz(r, I)),
                     st.in(B, sz(O, r)), N, I, O, r, scale, ldy, drop);
  st.finish();
}

void CudaBackend::lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                                const float* B, int N, int I, int O, int r, float scale, int ldy,
                                const LoraDropoutMask& drop) {
  Stage st(stream_, __func__);
  cuda::lora_backward(stream_, st.inout(dx, sz(N, I)), st.inout(dA, sz(r, I)), st.inout(dB, sz(O, r)),
                      st.in(dy, strided(N, O, ldy)), st.in(x, sz(N, I)), st.in(A, sz(r, I)), st.in(B, sz(O, r)), N, I,
                      O, r, scale, ldy, drop);
  st.finish();
}

void CudaBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                                    int T, int C) {
  Stage st(stream_, __func__);
  const size_t N = sz(B, T);
  const float* wte_d = st.in(wte, cuda::device_view(wte) ? 1 : sz(table_rows(tokens, N), C));
  cuda::embedding_forward(stream_, st.out(out, N * C), st.in(tokens, N), wte_d, st.in(wpe, sz(T, C)), B, T, C);
  st.finish();
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T,
                                     int C) {
  Stage st(stream_, __func__);
  const size_t N = sz(B, T);
  float* dwte_d = st.inout(dwte, !dwte || cuda::device_view(dwte) ? 1 : sz(table_rows(tokens, N), C));
  cuda::embedding_backward(stream_, dwte_d, st.inout(dwpe, sz(T, C)), st.in(dout, N * C), st.in(tokens, N), B, T, C);
  st.finish();
}

int64_t CudaBackend::table_rows(const int32_t* tokens, size_t N) {
  // The table's row count is not part of the call: a host-memory table is staged up to the largest token used.
  std::vector<int32_t> t(N);
  copy(t.data(), tokens, N * sizeof(int32_t));
  int32_t max_token = 0;
  for (int32_t v : t) max_token = v > max_token ? v : max_token;
  return (int64_t)max_token + 1;
}

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                    const float* b, int N, int C, float eps) {
  Stage st(stream_, __func__);
  cuda::layernorm_forward(stream_, st.out(out, sz(N, C)), st.out(mean, sz(N)), st.out(rstd, sz(N)),
                          st.in(inp, sz(N, C)), st.in(w, sz(C)), st.in(b, sz(C)), N, C, eps);
  st.finish();
}

void CudaBackend::layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                     const float* w, const float* mean, const float* rstd, int N, int C) {
  Stage st(stream_, __func__);
  cuda::layernorm_backward(stream_, st.inout(dinp, sz(N, C)), st.inout(dw, sz(C)), st.inout(db, sz(C)),
                           st.in(dout, sz(N, C)), st.in(inp, sz(N, C)), st.in(w, sz(C)), st.in(mean, sz(N)),
                           st.in(rstd, sz(N)), N, C);
  st.finish();
}

void CudaBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
  Stage st(stream_, __func__);
  cuda::rmsnorm_forward(stream_, st.out(out, sz(N, C)), st.out(rstd, sz(N)), st.in(inp, sz(N, C)), st.in(w, sz(C)), N,
                        C, eps);
  st.finish();
}

void CudaBackend::rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                   const float* rstd, int N, int C) {
  Stage st(stream_, __func__);
  cuda::rmsnorm_backward(stream_, st.inout(dinp, sz(N, C)), st.inout(dw, sz(C)), st.in(dout, sz(N, C)),
                         st.in(inp, sz(N, C)), st.in(w, sz(C)), st.in(rstd, sz(N)), N, C);
  st.finish();
}

void CudaBackend::rope_forward(float* out, const float* inp, int B, int T, const RopeSpec& spec) {
  Stage st(stream_, __func__);
  const size_t n = sz((int64_t)B * T, spec.row);
  cuda::rope_forward(stream_, st.out(out, n), st.in(inp, n), B, T, staged(st, spec));
  st.finish();
}

void CudaBackend::rope_backward(float* dinp, const float* dout, int B, int T, const RopeSpec& spec) {
  Stage st(stream_, __func__);
  const size_t n = sz((int64_t)B * T, spec.row);
  cuda::rope_backward(stream_, st.inout(dinp, n), st.in(dout, n), B, T, staged(st, spec));
  st.finish();
}

void CudaBackend::qk_norm_forward(float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w, int N,
                                  int NH, int NKV, int HS, bool per_head, float eps) {
  Stage st(stream_, __func__);
  const size_t n = sz(N, qkv_width(NH, NKV, HS)), groups = sz(N, per_head ? NH + NKV : 2);
  cuda::qk_norm_forward(stream_, st.out(out, n), st.out(rstd, groups), st.in(qkv, n),
                        st.in(q_w, sz(per_head ? HS : NH * HS)), st.in(k_w, sz(per_head ? HS : NKV * HS)), N, NH, NKV,
                        HS, per_head, eps);
  st.finish();
}

void CudaBackend::qk_norm_backward(float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                                   const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV,
                                   int HS, bool per_head) {
  Stage st(stream_, __func__);
  const size_t n = sz(N, qkv_width(NH, NKV, HS)), groups = sz(N, per_head ? NH + NKV : 2);
  const size_t qn = sz(per_head ? HS : NH * HS), kn = sz(per_head ? HS : NKV * HS);
  cuda::qk_norm_backward(stream_, st.inout(dqkv, n), st.inout(dq_w, qn), st.inout(dk_w, kn), st.in(dout, n),
                         st.in(qkv, n), st.in(q_w, qn), st.in(k_w, kn), st.in(rstd, groups), N, NH, NKV, HS,
                         per_head);
  st.finish();
}

void CudaBackend::clamp_forward(float* out, const float* inp, int64_t n, float limit) {
  Stage st(stream_, __func__);
  cuda::clamp_forward(stream_, st.out(out, sz(n)), st.in(inp, sz(n)), n, limit);
  st.finish();
}

void CudaBackend::clamp_backward(float* dinp, const float* dout, const float* inp, int64_t n, float limit) {
  Stage st(stream_, __func__);
  cuda::clamp_backward(stream_, st.inout(dinp, sz(n)), st.in(dout, sz(n)), st.in(inp, sz(n)), n, limit);
  st.finish();
}

void CudaBackend::attention_forward(float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                                    const AttentionSpec& spec) {
  Stage st(stream_, __func__);
  AttentionSpec s = spec;
  s.sinks = st.in(spec.sinks, sz(NH));
  s.dsinks = nullptr;
  const size_t rows = sz(B, T);
  cuda::attention_forward(stream_, st.out(out, rows * sz(NH, HS)), st.out(lse, rows * sz(NH)),
                          st.in(qkv, rows * qkv_width(NH, NKV, HS)), B, T, NH, NKV, HS, s);
  st.finish();
}

void CudaBackend::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                     const float* lse, int B, int T, int NH, int NKV, int HS,
                                     const AttentionSpec& spec) {
  Stage st(stream_, __func__);
  AttentionSpec s = spec;
  s.sinks = st.in(spec.sinks, sz(NH));
  s.dsinks = st.inout(spec.dsinks, sz(NH));
  const size_t rows = sz(B, T), width = sz(qkv_width(NH, NKV, HS));
  cuda::attention_backward(stream_, st.inout(dqkv, rows * width), st.in(dout, rows * sz(NH, HS)),
                           st.in(qkv, rows * width), st.in(out, rows * sz(NH, HS)), st.in(lse, rows * sz(NH)), B, T,
                           NH, NKV, HS, s);
  st.finish();
}

void CudaBackend::gelu_forward(float* out, const float* inp, int64_t n) {
  Stage st(stream_, __func__);
  cuda::gelu_forward(stream_, st.out(out, sz(n)), st.in(inp, sz(n)), n);
  st.finish();
}

void CudaBackend::gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  Stage st(stream_, __func__);
  cuda::gelu_backward(stream_, st.inout(dinp, sz(n)), st.in(inp, sz(n)), st.in(dout, sz(n)), n);
  st.finish();
}

void CudaBackend::swiglu_forward(float* out, const float* gate_up, int N, int F) {
  Stage st(stream_, __func__);
  cuda::swiglu_forward(stream_, st.out(out, sz(N, F)), st.in(gate_up, sz(N, 2 * F)), N, F);
  st.finish();
}

void CudaBackend::swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F) {
  Stage st(stream_, __func__);
  cuda::swiglu_backward(stream_, st.inout(dgate_up, sz(N, 2 * F)), st.in(dout, sz(N, F)), st.in(gate_up, sz(N, 2 * F)),
                        N, F);
  st.finish();
}

void CudaBackend::swiglu_clamped_forward(float* out, const float* gate_up, int N, int F, float alpha, float limit) {
  Stage st(stream_, __func__);
  cuda::swiglu_clamped_forward(stream_, st.out(out, sz(N, F)), st.in(gate_up, sz(N, 2 * F)), N, F, alpha, limit);
  st.finish();
}

void CudaBackend::swiglu_clamped_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                                          float alpha, float limit) {
  Stage st(stream_, __func__);
  cuda::swiglu_clamped_backward(stream_, st.inout(dgate_up, sz(N, 2 * F)), st.in(dout, sz(N, F)),
                                st.in(gate_up, sz(N, 2 * F)), N, F, alpha, limit);
  st.finish();
}

void CudaBackend::add_forward(float* out, const float* a, const float* b, int64_t n) {
  Stage st(stream_, __func__);
  cuda::add_forward(stream_, st.out(out, sz(n)), st.in(a, sz(n)), st.in(b, sz(n)), n);
  st.finish();
}

void CudaBackend::accumulate(float* dst, const float* src, int64_t n) {
  Stage st(stream_, __func__);
  cuda::accumulate(stream_, st.inout(dst, sz(n)), st.in(src, sz(n)), n);
  st.finish();
}

void CudaBackend::crossentropy_forward(float* losses, const float* logits, const int32_t* targets, int N, int V) {
  Stage st(stream_, __func__);
  cuda::crossentropy_forward(stream_, st.out(losses, sz(N)), st.in(logits, sz(N, V)), st.in(targets, sz(N)), N, V);
  st.finish();
}

void CudaBackend::crossentropy_backward(float* dlogits, const float* logits, const int32_t* targets, float scale,
                                        int N, int V) {
  Stage st(stream_, __func__);
  cuda::crossentropy_backward(stream_, st.inout(dlogits, sz(N, V)), st.in(logits, sz(N, V)), st.in(targets, sz(N)),
                              scale, N, V);
  st.finish();
}

void CudaBackend::sigmoid_gate_forward(float* out, const float* gate_logit, const float* s, int N, int C) {
  Stage st(stream_, __func__);
  cuda::sigmoid_gate_forward(stream_, st.out(out, sz(N, C)), st.in(gate_logit, sz(N)), st.in(s, sz(N, C)), N, C);
  st.finish();
}

void CudaBackend::sigmoid_gate_backward(float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                                        const float* s, int N, int C) {
  Stage st(stream_, __func__);
  cuda::sigmoid_gate_backward(stream_, st.inout(dgate_logit, sz(N)), st.inout(ds, sz(N, C)), st.in(dout, sz(N, C)),
                              st.in(gate_logit, sz(N)), st.in(s, sz(N, C)), N, C);
  st.finish();
}

}  // namespace moe
