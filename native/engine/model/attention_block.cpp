#include "model/attention_block.h"

#include "model/linear.h"

namespace moe {

size_t AttentionActs::bytes() const { return qkv.bytes() + qkv_rot.bytes() + att.bytes() + lse.bytes(); }

void AttentionBlock::reserve(Backend& be, AttentionActs& a, AttentionScratch& s, int B, int T) const {
  const size_t N = (size_t)B * T, Q = cfg_.qkv_width(), A = cfg_.attn_width();
  reserve_floats(be, a.qkv, N * Q);
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
  const float* qkv = a.qkv.f();
  if (f_.position == PositionKind::Rope) {
    be.rope_forward(a.qkv_rot.f(), a.qkv.f(), B, T, NH, NKV, HS, (float)f_.rope_theta);
    qkv = a.qkv_rot.f();
  }
  be.attention_forward(a.att.f(), a.lse.f(), qkv, B, T, NH, NKV, HS);
  linear_forward(be, out, a.att.f(), p.out_w, p.out_w_bf16, p.out_b, N, A, C);
}

void AttentionBlock::backward(Backend& be, const LayerParams& p, const LayerParams& g, AttentionActs& a,
                              AttentionScratch& s, float* datt, float* dx, const float* dout, const float* x, int B,
                              int T) const {
  const int N = B * T, C = cfg_.d_model, Q = cfg_.qkv_width(), A = cfg_.attn_width();
  const int NH = cfg_.n_heads, NKV = cfg_.n_kv_heads, HS = cfg_.head_size();
  be.zero(datt, (size_t)N * A * sizeof(float));
  linear_backward(be, datt, g.out_w, g.out_b, dout, a.att.f(), p.out_w, p.out_w_bf16, N, A, C);
  s.dqkv.zero();
  float* dqkv = s.dqkv.f();
  if (f_.position == PositionKind::Rope) {
    float* dqkv_rot = dqkv + (size_t)N * Q;
    be.attention_backward(dqkv_rot, datt, a.qkv_rot.f(), a.att.f(), a.lse.f(), B, T, NH, NKV, HS);
    be.rope_backward(dqkv, dqkv_rot, B, T, NH, NKV, HS, (float)f_.rope_theta);
  } else {
    be.attention_backward(dqkv, datt, a.qkv.f(), a.att.f(), a.lse.f(), B, T, NH, NKV, HS);
  }
  linear_backward(be, dx, g.qkv_w, g.qkv_b, dqkv, x, p.qkv_w, p.qkv_w_bf16, N, C, Q);
}

}  // namespace moe
