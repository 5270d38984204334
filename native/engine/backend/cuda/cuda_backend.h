// The CUDA backend: every op of the contract on kernels of our own (kernels.h), with "Device" memory managed
// (cudaMallocManaged) so host code that reads results (losses, router outputs, dispatch plans) keeps working.
// Ops accept any pointer (Stage, runtime.h) and return with their results ready, as the contract requires.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublas.h"
#include "backend/registry.h"

namespace moe {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  std::string describe() const override;
  int threads() const override { return threads_; }
  std::string device() const override;
  std::string versions() const override;
  std::string kernels() const override;
  bool bf16_native() const override { return true; }  // bf16 GEMMs on WMMA tensor cores

  void* alloc(MemKind kind, size_t bytes) override;
  void release(MemKind kind, void* ptr) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* ptr, size_t bytes) override;
  void synchronize() override;
  void transfer(void* dst, const void* src, size_t bytes) override;
  void transfer_zero(void* ptr, size_t bytes) override;

  void matmul_forward(float* y, const float* x, const float* w, const float* b, int N, int I, int O) override;
  void matmul_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N, int I,
                       int O) override;
  void grouped_matmul_forward(float* y, const float* x, const LinearGroups& g, int I, int O) override;
  void grouped_matmul_backward(float* dx, const float* dy, const float* x, const LinearGroups& g, int I,
                               int O) override;
  void lora_forward(float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r, float scale,
                    int ldy, const LoraDropoutMask& drop) override;
  void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A, const float* B,
                     int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop) override;
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                         int C) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T,
                          int C) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                         int C, float eps) override;
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                          const float* mean, const float* rstd, int N, int C) override;
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) override;
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                        int N, int C) override;
  using Backend::rope_backward;
  using Backend::rope_forward;
  void rope_forward(float* out, const float* inp, int B, int T, const RopeSpec& spec) override;
  void rope_backward(float* dinp, const float* dout, int B, int T, const RopeSpec& spec) override;
  void qk_norm_forward(float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w, int N, int NH,
                       int NKV, int HS, bool per_head, float eps) override;
  void qk_norm_backward(float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv, const float* q_w,
                        const float* k_w, const float* rstd, int N, int NH, int NKV, int HS, bool per_head) override;
  void clamp_forward(float* out, const float* inp, int64_t n, float limit) override;
  void clamp_backward(float* dinp, const float* dout, const float* inp, int64_t n, float limit) override;
  void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                         const AttentionSpec& spec) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                          int T, int NH, int NKV, int HS, const AttentionSpec& spec) override;
  void gelu_forward(float* out, const float* inp, int64_t n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) override;
  void swiglu_forward(float* out, const float* gate_up, int N, int F) override;
  void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F) override;
  void swiglu_clamped_forward(float* out, const float* gate_up, int N, int F, float alpha, float limit) override;
  void swiglu_clamped_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F, float alpha,
                               float limit) override;
  void add_forward(float* out, const float* a, const float* b, int64_t n) override;
  void accumulate(float* dst, const float* src, int64_t n) override;
  void crossentropy_forward(float* losses, const float* logits, const int32_t* targets, int N, int V) override;
  void crossentropy_backward(float* dlogits, const float* logits, const int32_t* targets, float scale, int N,
                             int V) override;

  void to_bf16(uint16_t* dst, const float* src, int64_t n) override;
  void matmul_forward_bf16(float* y, const float* x, const uint16_t* w, const float* b, int N, int I, int O) override;
  void matmul_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x, const uint16_t* w, int N,
                            int I, int O) override;

  RouterLosses router_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N, int E, int K,
                              const RouterSpec& spec, const int32_t* forced_topk) override;
  void router_backward(float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                       const float* topk_w, const float* logits, int N, int E, int K, const RouterSpec& spec,
                       float aux_scale, float z_scale) override;
  void dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity) override;
  void permute_forward(float* xs, const float* x, const DispatchPlan& plan, int C) override;
  void permute_backward(float* dx, const float* dxs, const DispatchPlan& plan, int C) override;
  void combine_forward(float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C) override;
  void combine_backward(float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                        const DispatchPlan& plan, int C) override;
  void sigmoid_gate_forward(float* out, const float* gate_logit, const float* s, int N, int C) override;
  void sigmoid_gate_backward(float* dgate_logit, float* ds, const float* dout, const float* gate_logit, const float* s,
                             int N, int C) override;

  void adamw_update(float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp) override;
  double sum_squares(const float* x, int64_t n) override;

 private:
  // Rows of an embedding table that tokens[0, N) reach.
  int64_t table_rows(const int32_t* tokens, size_t N);

  int threads_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // transfer(): the copy engine's queue, beside the ops' stream
  std::unique_ptr<cuda::Cublas> blas_;  // the linear layers' GEMMs when BackendOptions::gemm chose cuBLAS
  std::string blas_absent_;             // gemm "auto" without cuBLAS: why, for describe()
};

// The registry's entry (registry.cpp lists it when this build has CUDA).
const BackendEntry& cuda_backend_entry();

}  // namespace moe
