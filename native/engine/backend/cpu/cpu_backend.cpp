// The CPU backend: forwards every op of the contract to the cpu:: kernels on one thread pool, under its ISA
// choice (native or the scalar reference). "Device" memory is ordinary aligned host memory here; budgets and
// tiers are layered on top.
#include <cstdlib>
#include <cstring>

#include "backend/cpu/adamw.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/clamp.h"
#include "backend/cpu/convert_bf16.h"
#include "backend/cpu/crossentropy.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/layernorm.h"
#include "backend/cpu/lora.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_bf16.h"
#include "backend/cpu/laid_out_weights.h"
#include "backend/cpu/clear.h"
#include "backend/cpu/packed_weights.h"
#include "backend/cpu/qk_norm.h"
#include "backend/cpu/rmsnorm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/router.h"
#include "backend/cpu/sigmoid_gate.h"
#include "backend/cpu/swiglu.h"
#include "backend/cpu/swiglu_clamped.h"
#include "backend/registry.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace moe {
namespace {

#if defined(MOE_HAVE_CUDA)
constexpr const char* kGpuNote = "; the CUDA backend is built too";
#else
constexpr const char* kGpuNote = "; no GPU backend in this build";
#endif

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, cpu::Isa isa, bool pack_weights, bool memory_apart)
      : tp_(threads), isa_(isa), pack_weights_(pack_weights), memory_apart_(memory_apart) {}
  std::string name() const override { return "cpu"; }
  std::string describe() const override {
    const int threads = tp_.threads(), cpus = usable_cpus();
    std::string s = "cpu (" + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    // Said where the run's settings are first shown: more threads than CPUs is many times slower, not faster.
    if (threads > cpus)
      s += " on " + std::to_string(cpus) + " CPUs: more threads than CPUs take turns, and every parallel step waits " +
           "for the last; train.threads " + std::to_string(cpus) + " is faster";
    return s + "; " + kernels() + kGpuNote + ")";
  }
  std::string kernels() const override {
    const cpu::IsaScope isa(isa_);
    return std::string("sgemm ") + cpu::sgemm_isa() + ", bf16 gemm " + cpu::sgemm_bf16_kernel();
  }
  bool bf16_native() const override {
    const cpu::IsaScope isa(isa_);
    return cpu::sgemm_bf16_on_bf16_units();
  }
  int threads() const override { return tp_.threads(); }
  bool device_memory_is_host() const override { return !memory_apart_; }

  void* alloc(MemKind, size_t bytes) override {
    void* p = host_alloc(bytes);
    check(p != nullptr || bytes == 0, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void* alloc_zeroed(MemKind, size_t bytes) override {
    void* p = host_alloc_zeroed(bytes);
    check(p != nullptr || bytes == 0, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void release(MemKind, void* ptr) override { host_free(ptr); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void zero(void* ptr, size_t bytes) override { cpu::clear(tp_, ptr, bytes); }
  void synchronize() override {}

  void matmul_forward(float* y, const float* x, const float* w, const float* b, int N, int I, int O) override {
    const cpu::IsaScope isa(isa_);
    if (const float* laid = laid_out_.empty() ? nullptr : laid_out_.get(w, I, O))
      return cpu::matmul_forward_packed(tp_, y, x, laid, b, N, I, O);
    cpu::matmul_forward(tp_, y, x, w, b, N, I, O);
  }
  void matmul_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N, int I,
                       int O) override {
    linear_backward(dx, dw, db, dy, x, w, N, I, O, false);
  }
  // The groups' dx written by their GEMMs (beta 0), with no clearing pass before them.
  void grouped_matmul_backward_write_dx(float* dx, const float* dy, const float* x, const LinearGroups& g, int I,
                                        int O) override {
    g.for_each_backward(dx, dy, x, I, O, [&](int i, float* dxi, const float* dyi, const float* xi) {
      if (g.w_bf16[i]) linear_backward_bf16(dxi, g.dw[i], g.db[i], dyi, xi, g.w_bf16[i], g.rows[i], I, O, true);
      else linear_backward(dxi, g.dw[i], g.db[i], dyi, xi, g.w[i], g.rows[i], I, O, true);
    });
  }
  bool lay_out_weight(const float* w, const float* values, int I, int O) override {
    if (!pack_weights_) return false;
    const cpu::IsaScope isa(isa_);
    laid_out_.lay_out(tp_, w, values, I, O);
    return true;
  }
  void lora_forward(float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r, float scale,
                    int ldy, const LoraDropoutMask& drop) override {
    const cpu::IsaScope isa(isa_);
    cpu::lora_forward(tp_, y, x, A, B, N, I, O, r, scale, ldy, drop);
  }
  void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A, const float* B,
                     int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop) override {
    const cpu::IsaScope isa(isa_);
    cpu::lora_backward(tp_, dx, dA, dB, dy, x, A, B, N, I, O, r, scale, ldy, drop);
  }
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                         int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::embedding_forward(tp_, out, tokens, wte, wpe, B, T, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T,
                          int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::embedding_backward(tp_, dwte, dwpe, dout, tokens, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int N,
                         int C, float eps) override {
    const cpu::IsaScope isa(isa_);
    cpu::layernorm_forward(tp_, out, mean, rstd, inp, w, b, N, C, eps);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                          const float* mean, const float* rstd, int N, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::layernorm_backward(tp_, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) override {
    const cpu::IsaScope isa(isa_);
    cpu::rmsnorm_forward(tp_, out, rstd, inp, w, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                        int N, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::rmsnorm_backward(tp_, dinp, dw, dout, inp, w, rstd, N, C);
  }
  using Backend::rope_forward;
  using Backend::rope_backward;
  void rope_forward(float* out, const float* inp, int B, int T, const RopeSpec& spec) override {
    const cpu::IsaScope isa(isa_);
    cpu::rope_forward(tp_, out, inp, B, T, spec);
  }
  void rope_backward(float* dinp, const float* dout, int B, int T, const RopeSpec& spec) override {
    const cpu::IsaScope isa(isa_);
    cpu::rope_backward(tp_, dinp, dout, B, T, spec);
  }
  void qk_norm_forward(float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w, int N, int NH,
                       int NKV, int HS, bool per_head, float eps) override {
    const cpu::IsaScope isa(isa_);
    cpu::qk_norm_forward(tp_, out, rstd, qkv, q_w, k_w, N, NH, NKV, HS, per_head, eps);
  }
  void qk_norm_backward(float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv, const float* q_w,
                        const float* k_w, const float* rstd, int N, int NH, int NKV, int HS, bool per_head) override {
    const cpu::IsaScope isa(isa_);
    cpu::qk_norm_backward(tp_, dqkv, dq_w, dk_w, dout, qkv, q_w, k_w, rstd, N, NH, NKV, HS, per_head);
  }
  void clamp_forward(float* out, const float* inp, int64_t n, float limit) override {
    cpu::clamp_forward(tp_, out, inp, n, limit);
  }
  void clamp_backward(float* dinp, const float* dout, const float* inp, int64_t n, float limit) override {
    cpu::clamp_backward(tp_, dinp, dout, inp, n, limit);
  }
  void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                         const AttentionSpec& spec) override {
    const cpu::IsaScope isa(isa_);
    cpu::attention_forward(tp_, out, lse, qkv, B, T, NH, NKV, HS, spec);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                          int T, int NH, int NKV, int HS, const AttentionSpec& spec) override {
    const cpu::IsaScope isa(isa_);
    cpu::attention_backward(tp_, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS, spec);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    cpu::gelu_forward(tp_, out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    cpu::gelu_backward(tp_, dinp, inp, dout, n);
  }
  void swiglu_forward(float* out, const float* gate_up, int N, int F) override {
    const cpu::IsaScope isa(isa_);
    cpu::swiglu_forward(tp_, out, gate_up, N, F);
  }
  void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F) override {
    const cpu::IsaScope isa(isa_);
    cpu::swiglu_backward(tp_, dgate_up, dout, gate_up, N, F);
  }
  void swiglu_backward_write(float* dgate_up, const float* dout, const float* gate_up, int N, int F) override {
    const cpu::IsaScope isa(isa_);
    cpu::swiglu_backward(tp_, dgate_up, dout, gate_up, N, F, true);
  }
  void swiglu_clamped_forward(float* out, const float* gate_up, int N, int F, float alpha, float limit) override {
    cpu::swiglu_clamped_forward(tp_, out, gate_up, N, F, alpha, limit);
  }
  void swiglu_clamped_backward(float* dgate_up, const float* dout, const float* gate_up, int N, int F, float alpha,
                               float limit) override {
    cpu::swiglu_clamped_backward(tp_, dgate_up, dout, gate_up, N, F, alpha, limit);
  }
  void add_forward(float* out, const float* a, const float* b, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    cpu::add_forward(tp_, out, a, b, n);
  }
  void accumulate(float* dst, const float* src, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    cpu::accumulate(tp_, dst, src, n);
  }
  void crossentropy_forward(float* losses, const float* logits, const int32_t* targets, int N, int V) override {
    const cpu::IsaScope isa(isa_);
    cpu::crossentropy_forward(tp_, losses, logits, targets, N, V);
  }
  void crossentropy_backward(float* dlogits, const float* logits, const int32_t* targets, float scale, int N,
                             int V) override {
    const cpu::IsaScope isa(isa_);
    cpu::crossentropy_backward(tp_, dlogits, logits, targets, scale, N, V);
  }

  void to_bf16(uint16_t* dst, const float* src, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    cpu::to_bf16(tp_, dst, src, n);
    packed_.changed(dst, dst + n);
  }
  void keep_bf16_weights(const uint16_t* begin, const uint16_t* end) override {
    if (pack_weights_) packed_.keep(begin, end);
  }
  void forget_bf16_weights(const uint16_t* begin, const uint16_t* end) override { packed_.forget(begin, end); }
  void prepare_bf16_weight(const uint16_t* w, int I, int O, bool backward) override {
    const cpu::IsaScope isa(isa_);
    packed_.prepare(tp_, w, I, O, backward);
  }
  void discard(void* ptr, size_t bytes) override { host_release(ptr, bytes); }
  bool lay_out_bf16_weight(const uint16_t* w, const float* fp32, int I, int O) override {
    const cpu::IsaScope isa(isa_);
    return pack_weights_ && packed_.lay_out(tp_, w, fp32, I, O);
  }
  int64_t kept_bf16_bytes() const override { return packed_.bytes() + laid_out_.bytes(); }
  void matmul_forward_bf16(float* y, const float* x, const uint16_t* w, const float* b, int N, int I,
                           int O) override {
    const cpu::IsaScope isa(isa_);
    cpu::matmul_forward_bf16(tp_, y, x, w, packed_.get(tp_, w, I, O, true), b, N, I, O);
  }
  void matmul_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x, const uint16_t* w, int N,
                            int I, int O) override {
    linear_backward_bf16(dx, dw, db, dy, x, w, N, I, O, false);
  }

  RouterLosses router_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N, int E, int K,
                              const RouterSpec& spec, const int32_t* forced_topk) override {
    const cpu::IsaScope isa(isa_);
    return cpu::router_forward(tp_, probs, topk_idx, topk_w, logits, N, E, K, spec, forced_topk);
  }
  void router_backward(float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                       const float* topk_w, const float* logits, int N, int E, int K, const RouterSpec& spec,
                       float aux_scale, float z_scale) override {
    const cpu::IsaScope isa(isa_);
    cpu::router_backward(tp_, dlogits, dtopk_w, probs, topk_idx, topk_w, logits, N, E, K, spec, aux_scale, z_scale);
  }
  void dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity) override {
    const cpu::IsaScope isa(isa_);
    cpu::dispatch_plan(plan, topk_idx, N, E, K, capacity);
  }
  void permute_forward(float* xs, const float* x, const DispatchPlan& plan, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::permute_forward(tp_, xs, x, plan, C);
  }
  void permute_backward(float* dx, const float* dxs, const DispatchPlan& plan, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::permute_backward(tp_, dx, dxs, plan, C);
  }
  void combine_forward(float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::combine_forward(tp_, y, ys, topk_w, plan, C);
  }
  void combine_backward(float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                        const DispatchPlan& plan, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::combine_backward(tp_, dys, dtopk_w, dy, ys, topk_w, plan, C);
  }
  void sigmoid_gate_forward(float* out, const float* gate_logit, const float* s, int N, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::sigmoid_gate_forward(tp_, out, gate_logit, s, N, C);
  }
  void sigmoid_gate_backward(float* dgate_logit, float* ds, const float* dout, const float* gate_logit, const float* s,
                             int N, int C) override {
    const cpu::IsaScope isa(isa_);
    cpu::sigmoid_gate_backward(tp_, dgate_logit, ds, dout, gate_logit, s, N, C);
  }

  void adamw_update(float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp) override {
    const cpu::IsaScope isa(isa_);
    cpu::adamw_update(tp_, p, grad, m, v, n, hp);
  }
  void adamw_update_bf16(float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n,
                         const AdamWParams& hp) override {
    const cpu::IsaScope isa(isa_);
    cpu::adamw_update(tp_, p, grad, m, v, n, hp, p16);
    packed_.changed(p16, p16 + n);
  }
  double sum_squares(const float* x, int64_t n) override {
    const cpu::IsaScope isa(isa_);
    return cpu::sum_squares(tp_, x, n);
  }

 private:
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N, int I,
                       int O, bool write_dx) {
    const cpu::IsaScope isa(isa_);
    if (!laid_out_.empty()) laid_out_.check_unlaid(w, int64_t{I} * O, "matmul_backward");
    cpu::matmul_backward(tp_, dx, dw, db, dy, x, w, N, I, O, write_dx);
  }
  void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x, const uint16_t* w, int N,
                            int I, int O, bool write_dx) {
    const cpu::IsaScope isa(isa_);
    cpu::matmul_backward_bf16(tp_, dx, dw, db, dy, x, w, dx ? packed_.get(tp_, w, I, O, false) : nullptr, N, I, O,
                              write_dx);
  }

  ThreadPool tp_;
  cpu::Isa isa_;
  bool pack_weights_, memory_apart_;
  cpu::PackedBf16Weights packed_;
  cpu::LaidOutWeights laid_out_;  // fp32 weights of a model that only answers
};

std::string cpu_unusable_reason() { return ""; }  // baseline kernels run on any x86-64

std::unique_ptr<Backend> make_cpu(const BackendOptions& o) {
  return std::make_unique<CpuBackend>(o.threads, cpu::parse_isa(o.isa), o.pack_bf16_weights, o.device_memory_apart);
}

}  // namespace

const BackendEntry& cpu_backend_entry() {
  static const BackendEntry entry{"cpu", "host CPU: our own kernels on a thread pool (AVX-512, AVX2 or scalar)",
                                  &cpu_unusable_reason, &make_cpu};
  return entry;
}

}  // namespace moe
