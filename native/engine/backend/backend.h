// The backend contract: memory per kind, copies, and the ops every layer needs. The model, the trainer and
// the offload scheduler drive a Backend& and never know which one it is; they get one from the registry
// (registry.h). Op semantics are documented once, on the CPU kernels' declarations in cpu/*.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "backend/types.h"
#include "core/error.h"

namespace moe {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One line for logs and the UI: the backend, its threads or device, and the kernels it dispatched to.
  virtual std::string describe() const = 0;
  // The kernels it picked on this machine, for the Hardware view ("sgemm avx512, bf16 gemm amx"); empty when it
  // has no such choice to report.
  virtual std::string kernels() const { return ""; }
  // Whether train.compute_dtype bf16 runs its products on bf16 arithmetic units (bf16 instructions, tensor cores).
  // A backend without them computes bf16's bits on fp32 arithmetic, which is then not faster than fp32.
  virtual bool bf16_native() const { return false; }
  virtual int threads() const = 0;
  // The device it computes on, as validation records name it (backend/validation.h); empty for the host.
  virtual std::string device() const { return ""; }
  // The software under that device ("driver 13.0, runtime 13.0"), for the same records; empty for the host.
  virtual std::string versions() const { return ""; }
  // Whether its Device memory is ordinary host memory that any host thread may read in place (a host backend):
  // expert offload may then compute on the host copy of an expert instead of copying it into a slot, and keeps
  // its host tier in the model's arenas; otherwise the host tier is page-locked memory of its own
  // (offload/pinned_store.h) and a gradient's share of the norm is summed where it was computed.
  virtual bool device_memory_is_host() const { return false; }

  // Memory. Returned blocks are 64-byte aligned.
  virtual void* alloc(MemKind kind, size_t bytes) = 0;
  // A block of zeros; a backend whose fresh memory is zero already (host mappings) need not touch its pages.
  virtual void* alloc_zeroed(MemKind kind, size_t bytes) {
    void* p = alloc(kind, bytes);
    if (p) zero(p, bytes);
    return p;
  }
  virtual void release(MemKind kind, void* ptr) = 0;
  // Optional: [ptr, ptr + bytes) inside a Device block will not be read again before it is written: a backend may
  // hand its pages back (the CPU does, and the range then reads as zeros).
  virtual void discard(void* ptr, size_t bytes) {}
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* ptr, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Copies and zeroing issued by one copy thread (expert offload's worker) while ops run on the compute thread:
  // a device backend puts them on a queue of their own so they overlap the ops in flight; each returns when
  // done. The caller orders them against the ops (an op that reads a slot starts after its upload returned, a
  // download starts after the op that wrote it returned). The defaults are for host memory.
  virtual void transfer(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  virtual void transfer_zero(void* ptr, size_t bytes) { std::memset(ptr, 0, bytes); }

  // Dense ops.
  virtual void matmul_forward(float* y, const float* x, const float* w, const float* b, int N, int I, int O) = 0;
  virtual void matmul_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                               int I, int O) = 0;
  // A LoRA adapter adding scale·(x·Aᵀ)·Bᵀ onto O output columns whose rows are ldy apart (cpu/lora.h).
  // drop: dropout on x (types.h), the same mask in both.
  virtual void lora_forward(float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                            float scale, int ldy, const LoraDropoutMask& drop) = 0;
  virtual void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                             const float* B, int N, int I, int O, int r, float scale, int ldy,
                             const LoraDropoutMask& drop) = 0;
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                                 int C) = 0;
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T,
                                  int C) = 0;
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                                 int N, int C, float eps) = 0;
  virtual void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                  const float* w, const float* mean, const float* rstd, int N, int C) = 0;
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) = 0;
  virtual void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                const float* rstd, int N, int C) = 0;
  virtual void rope_forward(float* out, const float* inp, int B, int T, const RopeSpec& spec) = 0;
  virtual void rope_backward(float* dinp, const float* dout, int B, int T, const RopeSpec& spec) = 0;
  // Plain rope on the fused qkv rows.
  void rope_forward(float* out, const float* inp, int B, int T, int NH, int NKV, int HS, float theta) {
    rope_forward(out, inp, B, T, RopeSpec::qkv(NH, NKV, HS, theta));
  }
  void rope_backward(float* dinp, const float* dout, int B, int T, int NH, int NKV, int HS, float theta) {
    rope_backward(dinp, dout, B, T, RopeSpec::qkv(NH, NKV, HS, theta));
  }
  // RMSNorm of the q and k parts of packed qkv rows (cpu/qk_norm.h: per_head or over the whole q / k width).
  virtual void qk_norm_forward(float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w, int N,
                               int NH, int NKV, int HS, bool per_head, float eps) = 0;
  virtual void qk_norm_backward(float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                                const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV, int HS,
                                bool per_head) = 0;
  // out = clamp(inp, -limit, limit); backward accumulates dout where the input was not clamped.
  virtual void clamp_forward(float* out, const float* inp, int64_t n, float limit) = 0;
  virtual void clamp_backward(float* dinp, const float* dout, const float* inp, int64_t n, float limit) = 0;
  // spec: sliding window and sinks (types.h); the default is plain causal attention.
  virtual void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                                 const AttentionSpec& spec = {}) = 0;
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                                  int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec = {}) = 0;
  virtual void gelu_forward(float* out, const float* inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) = 0;
  virtual void swiglu_forward(float* out, const float* gate_up, int N, int F) = 0;
  virtual void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F) = 0;
  // swiglu_backward writing dgate_up rather than adding onto it (what it held is ignored): a gradient nothing else
  // adds to then needs no clearing first. The default clears, then accumulates.
  virtual void swiglu_backward_write(float* dgate_up, const float* dout, const float* gate_up, int N, int F) {
    zero(dgate_up, sizeof(float) * size_t(N) * 2 * F);
    swiglu_backward(dgate_up, dout, gate_up, N, F);
  }
  virtual void swiglu_clamped_forward(float* out, const float* gate_up, int N, int F, float alpha, float limit) = 0;
  virtual void swiglu_clamped_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                                       float alpha, float limit) = 0;
  virtual void add_forward(float* out, const float* a, const float* b, int64_t n) = 0;
  virtual void accumulate(float* dst, const float* src, int64_t n) = 0;
  virtual void crossentropy_forward(float* losses, const float* logits, const int32_t* targets, int N, int V) = 0;
  virtual void crossentropy_backward(float* dlogits, const float* logits, const int32_t* targets, float scale, int N,
                                     int V) = 0;

  // Mixed precision (train.compute_dtype "bf16"): bf16 weight copies and the linear layer on them. Optional: a
  // backend without them (a test double, a device without bf16 support) refuses bf16 models at their first use.
  virtual void to_bf16(uint16_t* dst, const float* src, int64_t n) { no_bf16(); }
  virtual void matmul_forward_bf16(float* y, const float* x, const uint16_t* w, const float* b, int N, int I, int O) {
    no_bf16();
  }
  virtual void matmul_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x,
                                    const uint16_t* w, int N, int I, int O) {
    no_bf16();
  }

  // Optional: regions of bf16 weight copies that many matmul_*_bf16 calls read between changes (a model's, between
  // optimizer steps). A backend may keep the weights there in layouts of its own, made at their first use after a
  // change (the CPU packs the GEMM's operands once instead of on every call). to_bf16 or adamw_update_bf16 writing
  // into a kept region is such a change; nothing else may write there. forget_bf16_weights comes before the memory is freed.
  // Results are the same bits either way.
  virtual void keep_bf16_weights(const uint16_t* begin, const uint16_t* end) {}
  virtual void forget_bf16_weights(const uint16_t* begin, const uint16_t* end) {}
  // Optional: the kept weight [O, I] at w will be read by matmul_forward_bf16 (and, with backward, by
  // matmul_backward_bf16's dx) until its next change; the backend may lay it out now instead of at that first call.
  // A model calls it for its frozen weights after writing them.
  virtual void prepare_bf16_weight(const uint16_t* w, int I, int O, bool backward) {}
  // Optional, for a model that only answers: lays the weight [O, I] whose bf16 copy belongs at w (inside a kept
  // region) out for matmul_forward_bf16 straight from its fp32 values (the words the copy would give), the copy
  // never written. That product on w reads the layout from then on; anything that would need the copy itself
  // (another shape, the backward's product, a change) is an error. Returns false where the backend keeps no
  // layouts of its own: the caller then writes the copy.
  virtual bool lay_out_bf16_weight(const uint16_t* w, const float* fp32, int I, int O) { return false; }
  // Optional, for a model that only answers in fp32: lays the linear weight [O, I] that belongs at w out, from its
  // values (at w, or a load's buffer), for matmul_forward, which reads that layout whenever it is given w from then
  // on, so the caller may hand w's memory back (discard) or never write it. Anything else that would read w
  // (another shape, the backward) is an error. Returns false where the backend keeps no layouts of its own: w must
  // then hold the values, and is read as it lies.
  virtual bool lay_out_weight(const float* w, const float* values, int I, int O) { return false; }
  // Bytes the backend holds for kept and laid-out weights now.
  virtual int64_t kept_bf16_bytes() const { return 0; }

  // Linear layers over row groups (types.h LinearGroups), each group exactly as matmul_forward(_bf16) /
  // matmul_backward(_bf16) on its rows, bit for bit; the groups' outputs must not overlap. The default makes
  // those calls one by one; a device backend runs each GEMM of all groups as one launch.
  virtual void grouped_matmul_forward(float* y, const float* x, const LinearGroups& g, int I, int O);
  // dx (may be null) += each group's dy·w ; dw[g] += dyᵀ·x ; db[g] += Σ_n dy.
  virtual void grouped_matmul_backward(float* dx, const float* dy, const float* x, const LinearGroups& g, int I,
                                       int O);
  // grouped_matmul_backward with each group's rows of dx (not null) written rather than added onto, as
  // swiglu_backward_write. The default clears those rows, then accumulates.
  virtual void grouped_matmul_backward_write_dx(float* dx, const float* dy, const float* x, const LinearGroups& g,
                                                int I, int O);

  // MoE ops.
  // forced_topk [N,K] (may be null): experts chosen for each token instead of the top-k (routing-skew experiments).
  virtual RouterLosses router_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N, int E,
                                      int K, const RouterSpec& spec, const int32_t* forced_topk) = 0;
  virtual void router_backward(float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                               const float* topk_w, const float* logits, int N, int E, int K, const RouterSpec& spec,
                               float aux_scale, float z_scale) = 0;
  virtual void dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity) = 0;
  virtual void permute_forward(float* xs, const float* x, const DispatchPlan& plan, int C) = 0;
  virtual void permute_backward(float* dx, const float* dxs, const DispatchPlan& plan, int C) = 0;
  virtual void combine_forward(float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C) = 0;
  virtual void combine_backward(float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                                const DispatchPlan& plan, int C) = 0;
  virtual void sigmoid_gate_forward(float* out, const float* gate_logit, const float* s, int N, int C) = 0;
  virtual void sigmoid_gate_backward(float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                                     const float* s, int N, int C) = 0;

  // Optimizer.
  virtual void adamw_update(float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp) = 0;
  // The same update, also writing the new weights' bf16 copy to p16 (the bits to_bf16 writes): a backend that fuses
  // the two saves bf16 compute the pass over the fp32 weights that refreshing the copy before the next forward costs.
  virtual void adamw_update_bf16(float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n,
                                 const AdamWParams& hp) {
    adamw_update(p, grad, m, v, n, hp);
    to_bf16(p16, p, n);
  }
  virtual double sum_squares(const float* x, int64_t n) = 0;

 private:
  [[noreturn]] void no_bf16() const {
    fail("the " + name() + " backend has no bf16 compute; set train.compute_dtype to \"fp32\"");
  }
};

}  // namespace moe
