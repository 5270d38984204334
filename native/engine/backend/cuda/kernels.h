// The CUDA kernels' launchers. Semantics are those documented on the CPU kernels of the same name
// (backend/cpu/*.h); every pointer here is one the device can dereference (Stage, runtime.h, provides them).
// Launchers only enqueue work on the stream; the backend waits. Deviations from the CPU's bits are noted here and
// on the kernels' files.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/runtime.h"
#include "backend/types.h"

namespace moe::cuda {

// cudaSuccess when the current device can run this build's kernels (a device older than the built architectures
// cannot: cudaErrorInvalidDeviceFunction / cudaErrorNoKernelImageForDevice).
cudaError_t kernels_loadable();

// C[M,N] = alpha·op(A)·op(B) + beta·C, row-major, as cpu/gemm.h. Each C element is reduced over k in ascending
// order by one thread (fma per k), so results depend only on K and never on the element's position, but the
// bits differ from the CPU's blocked order (relative ~K·2^-24).
void sgemm(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);
// The bf16 GEMM of cpu/gemm_bf16.h on tensor cores (WMMA, bf16 inputs rounded to nearest even, fp32
// accumulation). Not vdpbf16ps's bits: the products are exact and the tensor core's in-block addition order
// is its own, so results agree with the CPU's to fp32 accumulation error (relative ~K·2^-24), not bitwise.
void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc);
void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc);

// One GEMM per group in a single launch: group g computes C_g = alpha·op(A_g)·op(B_g) + beta_g·C_g, an M_g×N
// product over depth K_g, with N, the transposes and the leading dimensions shared by all groups. Every element
// has the bits sgemm / sgemm_bf16 give it for its group alone. first_tile is the launcher's own.
struct GemmGroup {
  const float* A;
  const void* B;  // float, or bf16 bits where the call says so
  float* C;
  int M, K;
  float beta;
  int first_tile;
};
void sgemm_grouped(Stage& st, bool trans_a, bool trans_b, std::vector<GemmGroup> groups, int N, float alpha, int lda,
                   int ldb, int ldc);
void sgemm_bf16_grouped(Stage& st, bool trans_a, bool trans_b, bool b_is_bf16, std::vector<GemmGroup> groups, int N,
                        float alpha, int lda, int ldb, int ldc);

// The linear layers (cpu/matmul.h, cpu/matmul_bf16.h), composed from the GEMMs: ours, or cuBLAS's where blas is
// not null (cublas.h; a grouped layer is then one cuBLAS call per group, the call its own matmul makes).
class Cublas;
void matmul_forward(cudaStream_t s, const Cublas* blas, float* y, const float* x, const float* w, const float* b, int N,
                    int I, int O);
void matmul_backward(cudaStream_t s, const Cublas* blas, float* dx, float* dw, float* db, const float* dy,
                     const float* x, const float* w, int N, int I, int O);
void matmul_forward_bf16(cudaStream_t s, const Cublas* blas, float* y, const float* x, const uint16_t* w,
                         const float* b, int N, int I, int O);
void matmul_backward_bf16(cudaStream_t s, const Cublas* blas, float* dx, float* dw, float* db, const float* dy,
                          const float* x, const uint16_t* w, int N, int I, int O);
// Backend::grouped_matmul_* over device pointers, each GEMM of all groups as one grouped launch; bf16: every group
// computes on its w_bf16, else on its w. Bias seeds and bias gradients are one launch per group that has them.
void grouped_matmul_forward(Stage& st, const Cublas* blas, float* y, const float* x, const LinearGroups& g, int I,
                            int O, bool bf16);
void grouped_matmul_backward(Stage& st, const Cublas* blas, float* dx, const float* dy, const float* x,
                             const LinearGroups& g, int I, int O, bool bf16);
// The LoRA adapter (cpu/lora.h) on our GEMMs: its rank-r products are too thin to gain from a library.
void lora_forward(cudaStream_t s, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy, const LoraDropoutMask& drop);
void lora_backward(cudaStream_t s, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop);

// Row broadcast y[n, o] = b[o] (the bias seed of the linear layers).
void fill_rows(cudaStream_t s, float* y, const float* b, int N, int O);
// db[o] += Σ_n dy[n, o], over n in ascending order per column.
void column_sum(cudaStream_t s, float* db, const float* dy, int N, int O);
// dst[j] = src[j] · factor[j] (LoRA's dropout applied to its input).
void multiply(cudaStream_t s, float* dst, const float* src, const float* factor, int64_t n);
// dst[j] += src[j] · factor[j].
void multiply_accumulate(cudaStream_t s, float* dst, const float* src, const float* factor, int64_t n);
// LoRA dropout factors of an [N, I] input (cpu/lora.h): 1/(1 - p) where kept, 0 where dropped.
void lora_dropout_factors(cudaStream_t s, float* f, int N, int I, const LoraDropoutMask& drop);

void embedding_forward(cudaStream_t s, float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C);
void embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C);
void layernorm_forward(cudaStream_t s, float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C, float eps);
void layernorm_backward(cudaStream_t s, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C);
void rmsnorm_forward(cudaStream_t s, float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps);
void rmsnorm_backward(cudaStream_t s, float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int N, int C);
// spec.inv_freq, when set, must be device-accessible.
void rope_forward(cudaStream_t s, float* out, const float* inp, int B, int T, const RopeSpec& spec);
void rope_backward(cudaStream_t s, float* dinp, const float* dout, int B, int T, const RopeSpec& spec);
void qk_norm_forward(cudaStream_t s, float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w,
                     int N, int NH, int NKV, int HS, bool per_head, float eps);
void qk_norm_backward(cudaStream_t s, float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                      const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV, int HS,
                      bool per_head);
void clamp_forward(cudaStream_t s, float* out, const float* inp, int64_t n, float limit);
void clamp_backward(cudaStream_t s, float* dinp, const float* dout, const float* inp, int64_t n, float limit);
// spec.sinks and spec.dsinks, when set, must be device-accessible. HS at most kMaxAttentionHead.
constexpr int kMaxAttentionHead = 512;
void attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                       const AttentionSpec& spec);
void attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec);
void gelu_forward(cudaStream_t s, float* out, const float* inp, int64_t n);
void gelu_backward(cudaStream_t s, float* dinp, const float* inp, const float* dout, int64_t n);
void swiglu_forward(cudaStream_t s, float* out, const float* gate_up, int N, int F);
void swiglu_backward(cudaStream_t s, float* dgate_up, const float* dout, const float* gate_up, int N, int F);
void swiglu_clamped_forward(cudaStream_t s, float* out, const float* gate_up, int N, int F, float alpha, float limit);
void swiglu_clamped_backward(cudaStream_t s, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                             float alpha, float limit);
void add_forward(cudaStream_t s, float* out, const float* a, const float* b, int64_t n);
void accumulate(cudaStream_t s, float* dst, const float* src, int64_t n);
void crossentropy_forward(cudaStream_t s, float* losses, const float* logits, const int32_t* targets, int N, int V);
void crossentropy_backward(cudaStream_t s, float* dlogits, const float* logits, const int32_t* targets, float scale,
                           int N, int V);
void to_bf16(cudaStream_t s, uint16_t* dst, const float* src, int64_t n);
void sigmoid_gate_forward(cudaStream_t s, float* out, const float* gate_logit, const float* x, int N, int C);
void sigmoid_gate_backward(cudaStream_t s, float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                           const float* x, int N, int C);

// Router sums the backend turns into RouterLosses: per expert Σ_n probs[n, e] (prob_sum, double) and the number
// of assignments (count), and Σ_n lse_n² (z_sum); each summed over tokens in ascending order.
struct RouterSums {
  double* prob_sum;  // [E]
  double* count;     // [E]
  double* z_sum;     // [1]
};
// spec.selection_bias, when set, must be device-accessible; scratch holds N·E floats (the choice scores).
void router_forward(cudaStream_t s, float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N, int E,
                    int K, const RouterSpec& spec, const int32_t* forced_topk, float* scratch, RouterSums sums);
// share [E] is scratch for the routing shares f_e.
void router_backward(cudaStream_t s, float* dlogits, const float* dtopk_w, const float* probs,
                     const int32_t* topk_idx, const float* topk_w, const float* logits, int N, int E, int K,
                     const RouterSpec& spec, float aux_scale, float z_scale, float* share);

// The device copy of a DispatchPlan's index arrays.
struct PlanView {
  int N = 0, K = 0, S = 0;
  const int32_t* slot_token = nullptr;   // [S]
  const int32_t* assign_slot = nullptr;  // [N·K]
};
void permute_forward(cudaStream_t s, float* xs, const float* x, const PlanView& plan, int C);
void permute_backward(cudaStream_t s, float* dx, const float* dxs, const PlanView& plan, int C);
void combine_forward(cudaStream_t s, float* y, const float* ys, const float* topk_w, const PlanView& plan, int C);
void combine_backward(cudaStream_t s, float* dys, float* dtopk_w, const float* dy, const float* ys,
                      const float* topk_w, const PlanView& plan, int C);

void adamw_update(cudaStream_t s, float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp);
// Σ x² in double, the CPU's bits (cpu/adamw.h): chunks of kSumSquaresChunk elements, each over 16 index-mod-16
// lanes added in lane order, then the chunks in order into out[0]. partial holds sum_squares_chunks(n) doubles.
constexpr int64_t kSumSquaresChunk = 65536;
inline int64_t sum_squares_chunks(int64_t n) { return (n + kSumSquaresChunk - 1) / kSumSquaresChunk; }
void sum_squares(cudaStream_t s, double* out, double* partial, const float* x, int64_t n);

}  // namespace moe::cuda
