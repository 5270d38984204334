#include "model/attention_block.h"

#include <utility>

#include "model/config_sections.h"
#include "model/linear.h"

namespace moe {

AttentionBlock::AttentionBlock(const ModelConfig& cfg, const ModelFeatures& features) : cfg_(cfg), f_(features) {
  if (f_.position != PositionKind::Rope || cfg.rope_scaling.type == RopeScalingType::None) return;
  const RopeFrequencies freq = rope_frequencies(cfg.rope_scaling, cfg.head_size(), cfg.rope_theta, cfg.max_seq_len);
  inv_freq_ = freq.inv_freq;
  rope_scale_ = freq.attention_factor;
}

RopeSpec AttentionBlock::rope_spec() const {
  RopeSpec s = RopeSpec::qkv(cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_size(), (float)f_.rope_theta);
  if (!inv_freq_.empty()) {
    s.inv_freq = inv_freq_.data();
    s.scale = rope_scale_;
  }
  return s;
}

size_t AttentionActs::bytes() const {
  return qkv.bytes() + qkv_norm.bytes() + qk_rstd.bytes() + qkv_clip.bytes() + qkv_rot.bytes() + att.bytes() +
         lse.bytes();
}

namespace {
// Normalised groups per token: q and k per head, or one each over the whole width.
int qk_groups(const ModelConfig& c, QkNorm k) { return k == QkNorm::Head ? c.n_heads + c.n_kv_heads : 2; }
}  // namespace

void AttentionBlock::reserve(Backend& be, AttentionActs& a, AttentionScratch& s, int B, int T) const {
  const size_t N = (size_t)B * T, Q = cfg_.qkv_width(), A = cfg_.attn_width();
  reserve_floats(be, a.qkv, N * Q);
  if (f_.qk_norm != QkNorm::None) {
    reserve_floats(be, a.qkv_norm, N * Q);
    reserve_floats(be, a.qk_rstd, N * qk_groups(cfg_, f_.qk_norm));
  }
  if (f_.clip_qkv > 0) reserve_floats(be, a.qkv_clip, N * Q);
  if (f_.position == PositionKind::Rope) reserve_floats(be, a.qkv_rot, N * Q);
  reserve_floats(be, a.att, N * A);
  reserve_floats(be, a.lse, (size_t)B * cfg_.n_heads * T);
  reserve_floats(be, s.dqkv, N * Q * 2);
}

void AttentionBlock::forward(Backend& be, const LayerParams& p, AttentionActs& a, float* out, const float* x, int B,
                             int T) const {
  const int N = B * T, C = cfg_.d_model, Q = cfg_.qkv_width(), A = cfg_.attn_width();
  const int NH = cfg_.n_heads, NKV = cfg_.n_kv_heads, HS = cfg_.head_size();
  linear_forward(be, a.qkv.f(), x, p.qkv_w, p.qkv_w_bf16, p.qkv_b, N, C, Q);
  lora_forward(be, p.lora_q, a.qkv.f(), x, N, C, NH * HS, Q);
  lora_forward(be, p.lora_k, a.qkv.f() + NH * HS, x, N, C, NKV * HS, Q);
  lora_forward(be, p.lora_v, a.qkv.f() + (NH + NKV) * HS, x, N, C, NKV * HS, Q);
  const float* qkv = a.qkv.f();
  if (f_.qk_norm != QkNorm::None) {
    be.qk_norm_forward(a.qkv_norm.f(), a.qk_rstd.f(), qkv, p.q_norm_w, p.k_norm_w, N, NH, NKV, HS,
                       f_.qk_norm == QkNorm::Head, (float)cfg_.norm_eps);
    qkv = a.qkv_norm.f();
  }
  if (f_.clip_qkv > 0) {
    be.clamp_forward(a.qkv_clip.f(), qkv, (int64_t)N * Q, (float)f_.clip_qkv);
    qkv = a.qkv_clip.f();
  }
  if (f_.position == PositionKind::Rope) {
    be.rope_forward(a.qkv_rot.f(), qkv, B, T, rope_spec());
    qkv = a.qkv_rot.f();
  }
  AttentionSpec spec;
  spec.window = p.window;
  spec.sinks = p.attn_sinks;
  be.attention_forward(a.att.f(), a.lse.f(), qkv, B, T, NH, NKV, HS, spec);
  linear_forward(be, out, a.att.f(), p.out_w, p.out_w_bf16, p.out_b, N, A, C);
  lora_forward(be, p.lora_out, out, a.att.f(), N, A, C, C);
}

void AttentionBlock::backward(Backend& be, const LayerParams& p, const LayerParams& g, AttentionActs& a,
                              AttentionScratch& s, float* datt, float* dx, const float* dout, const float* x, int B,
                              int T) const {
  const int N = B * T, C = cfg_.d_model, Q = cfg_.qkv_width(), A = cfg_.attn_width();
  const int NH = cfg_.n_heads, NKV = cfg_.n_kv_heads, HS = cfg_.head_size();
  const size_t bytes = (size_t)N * Q * sizeof(float);
  be.zero(datt, (size_t)N * A * sizeof(float));
  linear_backward(be, datt, g.out_w, g.out_b, dout, a.att.f(), p.out_w, p.out_w_bf16, N, A, C);
  lora_backward(be, p.lora_out, g.lora_out, datt, dout, a.att.f(), N, A, C, C);
  s.dqkv.zero();
  // The gradient moves back through the stages between two halves of the scratch: `d` holds the gradient of
  // the current stage's output, `next` (zeroed) receives its input's.
  float* d = s.dqkv.f();
  float* next = d + (size_t)N * Q;
  const float* att_in = f_.position == PositionKind::Rope ? a.qkv_rot.f()
                        : f_.clip_qkv > 0                 ? a.qkv_clip.f()
                        : f_.qk_norm != QkNorm::None      ? a.qkv_norm.f()
                                                          : a.qkv.f();
  AttentionSpec spec;
  spec.window = p.window;
  spec.sinks = p.attn_sinks;
  spec.dsinks = g.attn_sinks;
  be.attention_backward(d, datt, att_in, a.att.f(), a.lse.f(), B, T, NH, NKV, HS, spec);
  bool next_zero = true;
  auto target = [&] {
    if (!next_zero) be.zero(next, bytes);
    next_zero = false;
    return next;
  };
  auto step = [&] { std::swap(d, next); };
  if (f_.position == PositionKind::Rope) {
    be.rope_backward(target(), d, B, T, rope_spec());
    step();
  }
  if (f_.clip_qkv > 0) {
    be.clamp_backward(target(), d, f_.qk_norm != QkNorm::None ? a.qkv_norm.f() : a.qkv.f(), (int64_t)N * Q,
                      (float)f_.clip_qkv);
    step();
  }
  if (f_.qk_norm != QkNorm::None) {
    be.qk_norm_backward(target(), g.q_norm_w, g.k_norm_w, d, a.qkv.f(), p.q_norm_w, p.k_norm_w, a.qk_rstd.f(), N, NH,
                        NKV, HS, f_.qk_norm == QkNorm::Head);
    step();
  }
  linear_backward(be, dx, g.qkv_w, g.qkv_b, d, x, p.qkv_w, p.qkv_w_bf16, N, C, Q);
  lora_backward(be, p.lora_q, g.lora_q, dx, d, x, N, C, NH * HS, Q);
  lora_backward(be, p.lora_k, g.lora_k, dx, d + NH * HS, x, N, C, NKV * HS, Q);
  lora_backward(be, p.lora_v, g.lora_v, dx, d + (NH + NKV) * HS, x, N, C, NKV * HS, Q);
}

}  // namespace moe
