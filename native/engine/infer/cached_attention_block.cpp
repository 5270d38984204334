#include "infer/cached_attention_block.h"

#include <algorithm>
#include <cmath>

#include "model/config_sections.h"
#include "model/linear.h"
#include "model/mla_block.h"

namespace moe {
namespace {
constexpr float kLatentNormEps = 1e-6f;  // model/mla_block.cpp's: the modeling files' RMSNorm default

}  // namespace

void rope_row(float* row, int t, const RopeSpec& spec) {
  const int half = spec.dim / 2;
  const int first_step = spec.layout == RopeLayout::Interleaved ? 2 : 1;
  const int second_off = spec.layout == RopeLayout::Interleaved ? 1 : half;
  for (int i = 0; i < half; ++i) {
    const double f = spec.inv_freq ? spec.inv_freq[i] : std::pow((double)spec.theta, -2.0 * i / spec.dim);
    const double angle = t * f;
    const float c = (float)(spec.scale == 1.0 ? std::cos(angle) : std::cos(angle) * spec.scale);
    const float s = (float)(spec.scale == 1.0 ? std::sin(angle) : std::sin(angle) * spec.scale);
    for (int h0 = 0; h0 < spec.heads * spec.dim; h0 += spec.dim) {
      const int a = h0 + i * first_step, b = a + second_off;
      const float x1 = row[a], x2 = row[b];
      row[a] = x1 * c - x2 * s;
      row[b] = x2 * c + x1 * s;
    }
  }
}

CachedAttentionBlock::CachedAttentionBlock(const ModelConfig& cfg, const ModelFeatures& features)
    : cfg_(cfg), f_(features) {
  if (f_.attention == AttentionKind::Latent) {
    const LatentAttentionConfig& l = cfg.latent;
    const RopeFrequencies freq = rope_frequencies(cfg.rope_scaling, l.qk_rope_head_dim, cfg.rope_theta, cfg.max_seq_len);
    inv_freq_ = freq.inv_freq;
    rope_.dim = l.qk_rope_head_dim;
    rope_.heads = cfg.n_heads + 1;
    rope_.row = (cfg.n_heads + 1) * l.qk_rope_head_dim;
    rope_.theta = (float)cfg.rope_theta;
    rope_.inv_freq = inv_freq_.data();
    rope_.scale = freq.attention_factor;
    rope_.layout = l.rope_interleave ? RopeLayout::Interleaved : RopeLayout::HalfSplit;
    double scale = 1.0 / std::sqrt((double)(l.qk_nope_head_dim + l.qk_rope_head_dim));
    if (l.softmax_mscale && cfg.rope_scaling.type != RopeScalingType::None && cfg.rope_scaling.mscale_all_dim > 0) {
      const double m = yarn_mscale(cfg.rope_scaling.factor, cfg.rope_scaling.mscale_all_dim);
      scale *= m * m;
    }
    scale_ = (float)scale;
    return;
  }
  const int HS = cfg.head_size();
  scale_ = 1.0f / std::sqrt((float)HS);
  rope_ = RopeSpec::qkv(cfg.n_heads, cfg.n_kv_heads, HS, (float)f_.rope_theta);
  if (f_.position == PositionKind::Rope && cfg.rope_scaling.type != RopeScalingType::None) {
    const RopeFrequencies freq = rope_frequencies(cfg.rope_scaling, HS, cfg.rope_theta, cfg.max_seq_len);
    inv_freq_ = freq.inv_freq;
    rope_.inv_freq = inv_freq_.data();
    rope_.scale = freq.attention_factor;
  }
}

KvLayerShape CachedAttentionBlock::cache_shape() const {
  if (f_.attention == AttentionKind::Latent) {
    const LatentAttentionConfig& l = cfg_.latent;
    return {cfg_.n_heads, l.qk_nope_head_dim + l.qk_rope_head_dim, l.v_head_dim};
  }
  return {cfg_.n_kv_heads, cfg_.head_size(), cfg_.head_size()};
}

void CachedAttentionBlock::forward(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out,
                                   const float* x, int first, int n) {
  if (f_.attention == AttentionKind::Latent) latent(be, p, cache, l, out, x, first, n);
  else standard(be, p, cache, l, out, x, first, n);
}

void CachedAttentionBlock::standard(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out,
                                    const float* x, int first, int n) {
  const int C = cfg_.d_model, Q = cfg_.qkv_width(), NH = cfg_.n_heads, NKV = cfg_.n_kv_heads, HS = cfg_.head_size();
  reserve_floats(be, qkv_, (size_t)n * Q);
  reserve_floats(be, qkv2_, (size_t)n * Q);
  reserve_floats(be, rstd_, (size_t)n * (NH + NKV));
  reserve_floats(be, q_, (size_t)n * NH * HS);
  reserve_floats(be, att_, (size_t)n * NH * HS);
  linear_forward(be, qkv_.f(), x, p.qkv_w, p.qkv_w_bf16, p.qkv_b, n, C, Q);
  // A fine-tune's adapters (null when it has none), as the training forward adds them.
  lora_forward(be, p.lora_q, qkv_.f(), x, n, C, NH * HS, Q);
  lora_forward(be, p.lora_k, qkv_.f() + NH * HS, x, n, C, NKV * HS, Q);
  lora_forward(be, p.lora_v, qkv_.f() + (NH + NKV) * HS, x, n, C, NKV * HS, Q);
  float* qkv = qkv_.f();
  float* other = qkv2_.f();
  if (f_.qk_norm != QkNorm::None) {
    be.qk_norm_forward(other, rstd_.f(), qkv, p.q_norm_w, p.k_norm_w, n, NH, NKV, HS, f_.qk_norm == QkNorm::Head,
                       (float)cfg_.norm_eps);
    std::swap(qkv, other);
  }
  if (f_.clip_qkv > 0) {
    be.clamp_forward(other, qkv, (int64_t)n * Q, (float)f_.clip_qkv);
    std::swap(qkv, other);
  }
  for (int i = 0; i < n; ++i) {
    float* row = qkv + (size_t)i * Q;
    if (f_.position == PositionKind::Rope) rope_row(row, first + i, rope_);
    std::copy_n(row, NH * HS, q_.f() + (size_t)i * NH * HS);
    std::copy_n(row + NH * HS, NKV * HS, cache.k(l, first + i));
    std::copy_n(row + (NH + NKV) * HS, NKV * HS, cache.v(l, first + i));
  }
  cached_attention(att_.f(), q_.f(), cache, l, first, n, NH, scale_, p.window, p.attn_sinks);
  linear_forward(be, out, att_.f(), p.out_w, p.out_w_bf16, p.out_b, n, NH * HS, C);
  lora_forward(be, p.lora_out, out, att_.f(), n, NH * HS, C, C);
}

void CachedAttentionBlock::latent(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out,
                                  const float* x, int first, int n) {
  const LatentAttentionConfig& lc = cfg_.latent;
  const int C = cfg_.d_model, NH = cfg_.n_heads, dn = lc.qk_nope_head_dim, dr = lc.qk_rope_head_dim;
  const int dv = lc.v_head_dim, D = dn + dr, kvr = lc.kv_lora_rank, qr = lc.q_lora_rank, KV = dn + dv;
  const int PE = (NH + 1) * dr;
  const MlaParams& m = p.mla;
  reserve_floats(be, q_, (size_t)n * NH * D);
  reserve_floats(be, rstd_, n);
  if (qr == 0) {
    linear_forward(be, q_.f(), x, m.q_w, m.q_w_bf16, nullptr, n, C, NH * D);
    lora_forward(be, p.lora_q, q_.f(), x, n, C, NH * D, NH * D);
  } else {
    reserve_floats(be, q_a_, (size_t)n * qr);
    reserve_floats(be, q_an_, (size_t)n * qr);
    linear_forward(be, q_a_.f(), x, m.q_a_w, m.q_a_w_bf16, nullptr, n, C, qr);
    lora_forward(be, m.lora_q_a, q_a_.f(), x, n, C, qr, qr);
    be.rmsnorm_forward(q_an_.f(), rstd_.f(), q_a_.f(), m.q_a_norm_w, n, qr, kLatentNormEps);
    linear_forward(be, q_.f(), q_an_.f(), m.q_b_w, m.q_b_w_bf16, nullptr, n, qr, NH * D);
    lora_forward(be, m.lora_q_b, q_.f(), q_an_.f(), n, qr, NH * D, NH * D);
  }
  reserve_floats(be, ckv_, (size_t)n * kvr);
  reserve_floats(be, ckvn_, (size_t)n * kvr);
  reserve_floats(be, kpe_, (size_t)n * dr);
  reserve_floats(be, kv_, (size_t)n * NH * KV);
  reserve_floats(be, pe_, (size_t)n * PE);
  reserve_floats(be, qkv_, (size_t)n * NH * D);
  reserve_floats(be, att_, (size_t)n * NH * dv);
  reserve_floats(be, ckv_kpe_, (size_t)n * (kvr + dr));
  mla_kv_a_forward(be, ckv_.f(), kpe_.f(), ckv_kpe_.f(), x, m, n, C, kvr, dr);
  be.rmsnorm_forward(ckvn_.f(), rstd_.f(), ckv_.f(), m.kv_a_norm_w, n, kvr, kLatentNormEps);
  linear_forward(be, kv_.f(), ckvn_.f(), m.kv_b_w, m.kv_b_w_bf16, nullptr, n, kvr, NH * KV);
  lora_forward(be, m.lora_kv_b, kv_.f(), ckvn_.f(), n, kvr, NH * KV, NH * KV);
  for (int i = 0; i < n; ++i) {
    const int t = first + i;
    float* pe = pe_.f() + (size_t)i * PE;
    const float* q = q_.f() + (size_t)i * NH * D;
    const float* kv = kv_.f() + (size_t)i * NH * KV;
    for (int h = 0; h < NH; ++h) std::copy_n(q + h * D + dn, dr, pe + h * dr);
    std::copy_n(kpe_.f() + (size_t)i * dr, dr, pe + NH * dr);
    rope_row(pe, t, rope_);
    float* qh_all = qkv_.f() + (size_t)i * NH * D;
    float* k = cache.k(l, t);
    float* v = cache.v(l, t);
    for (int h = 0; h < NH; ++h) {
      std::copy_n(q + h * D, dn, qh_all + h * D);
      std::copy_n(pe + h * dr, dr, qh_all + h * D + dn);
      std::copy_n(kv + h * KV, dn, k + h * D);
      std::copy_n(pe + NH * dr, dr, k + h * D + dn);
      std::copy_n(kv + h * KV + dn, dv, v + h * dv);
    }
  }
  cached_attention(att_.f(), qkv_.f(), cache, l, first, n, NH, scale_, 0, nullptr);
  linear_forward(be, out, att_.f(), p.out_w, p.out_w_bf16, nullptr, n, NH * dv, C);
  lora_forward(be, p.lora_out, out, att_.f(), n, NH * dv, C, C);
}

}  // namespace moe
