#include "model/mla_block.h"

#include <algorithm>
#include <cmath>

#include "model/linear.h"

namespace moe {
namespace {
constexpr float kLatentNormEps = 1e-6f;
}

size_t MlaActs::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b : {&q_a, &q_a_rstd, &q_an, &q, &ckv, &kpe, &ckv_kpe, &ckv_rstd, &ckvn, &kv, &pe, &pe_rot, &qkv,
                                &att, &lse, &att_v})
    n += b->bytes();
  return n;
}

size_t MlaScratch::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b : {&dqkv, &datt_pad, &dpe_rot, &dpe, &dq, &dkv, &dckvn, &dckv, &dkpe, &dq_an, &dq_a})
    n += b->bytes();
  return n;
}

MlaBlock::MlaBlock(const ModelConfig& cfg, const ModelFeatures& features) : cfg_(cfg) {
  const LatentAttentionConfig& l = cfg.latent;
  NH_ = cfg.n_heads;
  dn_ = l.qk_nope_head_dim;
  dr_ = l.qk_rope_head_dim;
  dv_ = l.v_head_dim;
  D_ = dn_ + dr_;
  HS_ = std::max(D_, dv_);
  kvr_ = l.kv_lora_rank;
  qr_ = l.q_lora_rank;
  if (!l.enabled()) return;
  const RopeFrequencies freq = rope_frequencies(cfg.rope_scaling, dr_, cfg.rope_theta, cfg.max_seq_len);
  inv_freq_ = freq.inv_freq;
  rope_scale_ = freq.attention_factor;
  softmax_scale_ = 1.0 / std::sqrt((double)D_);
  if (l.softmax_mscale && cfg.rope_scaling.type != RopeScalingType::None && cfg.rope_scaling.mscale_all_dim > 0) {
    const double m = yarn_mscale(cfg.rope_scaling.factor, cfg.rope_scaling.mscale_all_dim);
    softmax_scale_ *= m * m;
  }
  q_prescale_ = (float)(softmax_scale_ * std::sqrt((double)HS_));
}

RopeSpec MlaBlock::rope_spec() const {
  RopeSpec s;
  s.dim = dr_;
  s.heads = NH_ + 1;  // every query head's rope part, then the shared key's
  s.row = (NH_ + 1) * dr_;
  s.theta = (float)cfg_.rope_theta;
  s.inv_freq = inv_freq_.data();
  s.scale = rope_scale_;
  s.layout = cfg_.latent.rope_interleave ? RopeLayout::Interleaved : RopeLayout::HalfSplit;
  return s;
}

void mla_kv_a_forward(Backend& be, float* ckv, float* kpe, float* both, const float* x, const MlaParams& m, int N,
                      int C, int kvr, int dr) {
  const int W = kvr + dr;
  linear_forward(be, both, x, m.kv_a_w, m.kv_a_w_bf16, nullptr, N, C, W);
  lora_forward(be, m.lora_kv_a, both, x, N, C, W, W);
  for (int n = 0; n < N; ++n) {
    std::copy_n(both + (size_t)n * W, kvr, ckv + (size_t)n * kvr);
    std::copy_n(both + (size_t)n * W + kvr, dr, kpe + (size_t)n * dr);
  }
}

void MlaBlock::reserve(Backend& be, MlaActs& a, MlaScratch& s, int B, int T) const {
  const size_t N = (size_t)B * T, NH = NH_, PE = (NH + 1) * dr_, QKV = 3 * NH * HS_;
  if (qr_ > 0) {
    reserve_floats(be, a.q_a, N * qr_);
    reserve_floats(be, a.q_a_rstd, N);
    reserve_floats(be, a.q_an, N * qr_);
    reserve_floats(be, s.dq_an, N * qr_);
    reserve_floats(be, s.dq_a, N * qr_);
  }
  reserve_floats(be, a.q, N * NH * D_);
  reserve_floats(be, a.ckv, N * kvr_);
  reserve_floats(be, a.kpe, N * dr_);
  reserve_floats(be, a.ckv_kpe, N * (kvr_ + dr_));
  reserve_floats(be, a.ckv_rstd, N);
  reserve_floats(be, a.ckvn, N * kvr_);
  reserve_floats(be, a.kv, N * NH * (dn_ + dv_));
  reserve_floats(be, a.pe, N * PE);
  reserve_floats(be, a.pe_rot, N * PE);
  reserve_floats(be, a.qkv, N * QKV);
  reserve_floats(be, a.att, N * NH * HS_);
  reserve_floats(be, a.lse, (size_t)B * NH * T);
  reserve_floats(be, a.att_v, N * NH * dv_);
  reserve_floats(be, s.dqkv, N * QKV);
  reserve_floats(be, s.datt_pad, N * NH * HS_);
  reserve_floats(be, s.dpe_rot, N * PE);
  reserve_floats(be, s.dpe, N * PE);
  reserve_floats(be, s.dq, N * NH * D_);
  reserve_floats(be, s.dkv, N * NH * (dn_ + dv_));
  reserve_floats(be, s.dckvn, N * kvr_);
  reserve_floats(be, s.dckv, N * kvr_);
  reserve_floats(be, s.dkpe, N * dr_);
}

void MlaBlock::forward(Backend& be, const LayerParams& p, MlaActs& a, float* out, const float* x, int B,
                       int T) const {
  const int N = B * T, C = cfg_.d_model, NH = NH_, dn = dn_, dr = dr_, dv = dv_, D = D_, HS = HS_;
  const MlaParams& m = p.mla;
  if (qr_ == 0) {
    linear_forward(be, a.q.f(), x, m.q_w, m.q_w_bf16, nullptr, N, C, NH * D);
    lora_forward(be, p.lora_q, a.q.f(), x, N, C, NH * D, NH * D);
  } else {
    linear_forward(be, a.q_a.f(), x, m.q_a_w, m.q_a_w_bf16, nullptr, N, C, qr_);
    lora_forward(be, m.lora_q_a, a.q_a.f(), x, N, C, qr_, qr_);
    be.rmsnorm_forward(a.q_an.f(), a.q_a_rstd.f(), a.q_a.f(), m.q_a_norm_w, N, qr_, kLatentNormEps);
    linear_forward(be, a.q.f(), a.q_an.f(), m.q_b_w, m.q_b_w_bf16, nullptr, N, qr_, NH * D);
    lora_forward(be, m.lora_q_b, a.q.f(), a.q_an.f(), N, qr_, NH * D, NH * D);
  }
  mla_kv_a_forward(be, a.ckv.f(), a.kpe.f(), a.ckv_kpe.f(), x, m, N, C, kvr_, dr);
  be.rmsnorm_forward(a.ckvn.f(), a.ckv_rstd.f(), a.ckv.f(), m.kv_a_norm_w, N, kvr_, kLatentNormEps);
  linear_forward(be, a.kv.f(), a.ckvn.f(), m.kv_b_w, m.kv_b_w_bf16, nullptr, N, kvr_, NH * (dn + dv));
  lora_forward(be, m.lora_kv_b, a.kv.f(), a.ckvn.f(), N, kvr_, NH * (dn + dv), NH * (dn + dv));

  const int PE = (NH + 1) * dr, KV = dn + dv;
  const float* q = a.q.f();
  const float* kv = a.kv.f();
  float* pe = a.pe.f();
  for (int n = 0; n < N; ++n) {
    for (int h = 0; h < NH; ++h) std::copy_n(q + ((size_t)n * NH + h) * D + dn, dr, pe + (size_t)n * PE + h * dr);
    std::copy_n(a.kpe.f() + (size_t)n * dr, dr, pe + (size_t)n * PE + NH * dr);
  }
  be.rope_forward(a.pe_rot.f(), pe, B, T, rope_spec());
  const float* rot = a.pe_rot.f();
  float* qkv = a.qkv.f();
  const float s = q_prescale_;
  std::fill_n(qkv, (size_t)N * 3 * NH * HS, 0.0f);
  for (int n = 0; n < N; ++n) {
    float* row = qkv + (size_t)n * 3 * NH * HS;
    const float* r = rot + (size_t)n * PE;
    for (int h = 0; h < NH; ++h) {
      float* qh = row + h * HS;
      float* kh = row + (NH + h) * HS;
      float* vh = row + (2 * NH + h) * HS;
      const float* qs = q + ((size_t)n * NH + h) * D;
      const float* kvh = kv + ((size_t)n * NH + h) * KV;
      for (int j = 0; j < dn; ++j) qh[j] = s * qs[j];
      for (int j = 0; j < dr; ++j) qh[dn + j] = s * r[h * dr + j];
      std::copy_n(kvh, dn, kh);
      std::copy_n(r + NH * dr, dr, kh + dn);
      std::copy_n(kvh + dn, dv, vh);
    }
  }
  be.attention_forward(a.att.f(), a.lse.f(), qkv, B, T, NH, NH, HS);
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < NH; ++h)
      std::copy_n(a.att.f() + ((size_t)n * NH + h) * HS, dv, a.att_v.f() + ((size_t)n * NH + h) * dv);
  linear_forward(be, out, a.att_v.f(), p.out_w, p.out_w_bf16, nullptr, N, NH * dv, C);
  lora_forward(be, p.lora_out, out, a.att_v.f(), N, NH * dv, C, C);
}

void MlaBlock::backward(Backend& be, const LayerParams& p, const LayerParams& g, MlaActs& a, MlaScratch& s,
                        float* datt, float* dx, const float* dout, const float* x, int B, int T) const {
  const int N = B * T, C = cfg_.d_model, NH = NH_, dn = dn_, dr = dr_, dv = dv_, D = D_, HS = HS_;
  const MlaParams& m = p.mla;
  const MlaParams& gm = g.mla;
  be.zero(datt, (size_t)N * NH * dv * sizeof(float));
  linear_backward(be, datt, g.out_w, nullptr, dout, a.att_v.f(), p.out_w, p.out_w_bf16, N, NH * dv, C);
  lora_backward(be, p.lora_out, g.lora_out, datt, dout, a.att_v.f(), N, NH * dv, C, C);
  float* dpad = s.datt_pad.f();
  std::fill_n(dpad, (size_t)N * NH * HS, 0.0f);
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < NH; ++h) std::copy_n(datt + ((size_t)n * NH + h) * dv, dv, dpad + ((size_t)n * NH + h) * HS);
  s.dqkv.zero();
  be.attention_backward(s.dqkv.f(), dpad, a.qkv.f(), a.att.f(), a.lse.f(), B, T, NH, NH, HS);

  const int PE = (NH + 1) * dr, KV = dn + dv;
  const float sc = q_prescale_;
  float* dq = s.dq.f();
  float* dkv = s.dkv.f();
  float* drot = s.dpe_rot.f();
  std::fill_n(drot, (size_t)N * PE, 0.0f);
  for (int n = 0; n < N; ++n) {
    const float* row = s.dqkv.f() + (size_t)n * 3 * NH * HS;
    float* r = drot + (size_t)n * PE;
    for (int h = 0; h < NH; ++h) {
      const float* qh = row + h * HS;
      const float* kh = row + (NH + h) * HS;
      const float* vh = row + (2 * NH + h) * HS;
      float* dqh = dq + ((size_t)n * NH + h) * D;
      float* dkvh = dkv + ((size_t)n * NH + h) * KV;
      for (int j = 0; j < dn; ++j) dqh[j] = sc * qh[j];
      for (int j = 0; j < dr; ++j) r[h * dr + j] = sc * qh[dn + j];
      std::copy_n(kh, dn, dkvh);
      for (int j = 0; j < dr; ++j) r[NH * dr + j] += kh[dn + j];
      std::copy_n(vh, dv, dkvh + dn);
    }
  }
  s.dpe.zero();
  be.rope_backward(s.dpe.f(), drot, B, T, rope_spec());
  for (int n = 0; n < N; ++n) {
    const float* d = s.dpe.f() + (size_t)n * PE;
    for (int h = 0; h < NH; ++h) std::copy_n(d + h * dr, dr, dq + ((size_t)n * NH + h) * D + dn);
    std::copy_n(d + NH * dr, dr, s.dkpe.f() + (size_t)n * dr);
  }

  s.dckvn.zero();
  linear_backward(be, s.dckvn.f(), gm.kv_b_w, nullptr, dkv, a.ckvn.f(), m.kv_b_w, m.kv_b_w_bf16, N, kvr_, NH * KV);
  lora_backward(be, m.lora_kv_b, gm.lora_kv_b, s.dckvn.f(), dkv, a.ckvn.f(), N, kvr_, NH * KV, NH * KV);
  s.dckv.zero();
  be.rmsnorm_backward(s.dckv.f(), gm.kv_a_norm_w, s.dckvn.f(), a.ckv.f(), m.kv_a_norm_w, a.ckv_rstd.f(), N, kvr_);
  const size_t kpe_at = (size_t)kvr_ * C;
  linear_backward(be, dx, gm.kv_a_w, nullptr, s.dckv.f(), x, m.kv_a_w, m.kv_a_w_bf16, N, C, kvr_);
  lora_backward(be, m.lora_kv_a, gm.lora_kv_a, dx, s.dckv.f(), x, N, C, kvr_, kvr_);
  linear_backward(be, dx, gm.kv_a_w ? gm.kv_a_w + kpe_at : nullptr, nullptr, s.dkpe.f(), x, m.kv_a_w + kpe_at,
                  m.kv_a_w_bf16 ? m.kv_a_w_bf16 + kpe_at : nullptr, N, C, dr);
  lora_backward(be, lora_rows_from(m.lora_kv_a, kvr_), lora_rows_from(gm.lora_kv_a, kvr_), dx, s.dkpe.f(), x, N, C, dr, dr);
  if (qr_ == 0) {
    linear_backward(be, dx, gm.q_w, nullptr, dq, x, m.q_w, m.q_w_bf16, N, C, NH * D);
    lora_backward(be, p.lora_q, g.lora_q, dx, dq, x, N, C, NH * D, NH * D);
  } else {
    s.dq_an.zero();
    linear_backward(be, s.dq_an.f(), gm.q_b_w, nullptr, dq, a.q_an.f(), m.q_b_w, m.q_b_w_bf16, N, qr_, NH * D);
    lora_backward(be, m.lora_q_b, gm.lora_q_b, s.dq_an.f(), dq, a.q_an.f(), N, qr_, NH * D, NH * D);
    s.dq_a.zero();
    be.rmsnorm_backward(s.dq_a.f(), gm.q_a_norm_w, s.dq_an.f(), a.q_a.f(), m.q_a_norm_w, a.q_a_rstd.f(), N, qr_);
    linear_backward(be, dx, gm.q_a_w, nullptr, s.dq_a.f(), x, m.q_a_w, m.q_a_w_bf16, N, C, qr_);
    lora_backward(be, m.lora_q_a, gm.lora_q_a, dx, s.dq_a.f(), x, N, C, qr_, qr_);
  }
}

}  // namespace moe
