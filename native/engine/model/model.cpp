#include "model/model.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "model/linear.h"
#include "moe/routing_skew.h"

namespace moe {

Model::Model(const ModelConfig& cfg, Backend& be, ComputeDtype dtype, const FinetuneConfig& finetune)
    : cfg_(cfg), features_(model_features(cfg_)), attention_(cfg_, features_), mla_(cfg_, features_), be_(be), dtype_(dtype), layout_(cfg_, finetune),
      trainable_(layout_, finetune) {
  reserve_floats(be_, params_, layout_.total());
  reserve_floats(be_, grads_, trainable_.grad_total());
  p_ = layout_.bind(params_.f());
  g_ = trainable_.everything() ? layout_.bind(grads_.f()) : layout_.bind(grads_.f(), trainable_.grad_offsets());
  if (dtype_ == ComputeDtype::BF16) bind_bf16_weights();
  if (finetune.uses_lora()) attach_lora_dropout(static_cast<float>(finetune.lora.dropout));
  resident_experts_ = std::make_unique<ResidentExpertAccess>(p_, g_);
  for (int l = 0; l < cfg_.n_layers; ++l)
    if (cfg_.is_moe_layer(l)) moe_layers_.push_back(std::make_unique<MoeLayer>(MoeShape::from_config(cfg_, l), l));
}

void Model::attach_lora_dropout(float p) {
  lora_dropout_.p = p;
  auto attach = [&](LoraParams& l) { l.dropout = &lora_dropout_; };
  auto ffn = [&](FfnParams& f) {
    attach(f.lora_in[0]);
    attach(f.lora_in[1]);
    attach(f.lora_out);
  };
  for (LayerParams& l : p_.layers) {
    for (LoraParams* a : {&l.lora_q, &l.lora_k, &l.lora_v, &l.lora_out, &l.mla.lora_q_a, &l.mla.lora_q_b,
                          &l.mla.lora_kv_a, &l.mla.lora_kv_b})
      attach(*a);
    ffn(l.mlp);
    ffn(l.shared);
    ffn(l.residual);
    for (FfnParams& e : l.experts) ffn(e);
  }
}

void Model::run_experts_on_devices(const PlacementConfig& placement, const PipelineConfig& pipeline,
                                   const DeviceGroupConfig& devices) {
  check(trainable_.everything(), "placement.devices: experts on devices train every parameter for now (no finetune section)");
  device_group_ = std::make_unique<DeviceGroup>(placement, pipeline, devices);
  device_experts_.clear();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    if (!cfg_.is_moe_layer(l)) continue;
    MoeLayer& layer = *moe_layers_[cfg_.moe_index(l)];
    device_experts_.push_back(std::make_unique<DeviceExperts>(*device_group_, layer.shape().expert, layer.shape().E, l));
    layer.run_experts_on(device_experts_.back().get());
  }
}

std::vector<LayerPlacement> Model::take_device_records() {
  std::vector<LayerPlacement> out;
  for (auto& d : device_experts_) out.push_back(d->take_record());
  return out;
}

std::vector<int64_t> Model::device_peak_bytes() const {
  return device_group_ ? device_group_->peak_bytes() : std::vector<int64_t>{};
}

// Every linear weight (what the products read: attention projections, FFNs and experts, the head) with its bf16
// pointer, the one list bf16 compute mirrors and an answering model lays out. The router is not one: it stays fp32
// (its logits pick the experts, and a bf16 rounding there would flip near-tied choices).
void Model::for_each_linear(const std::function<void(const float*, const uint16_t**)>& fn) {
  auto ffn = [&](FfnParams& f) {
    if (!f.w_in) return;
    fn(f.w_in, &f.w_in_bf16);
    fn(f.w_out, &f.w_out_bf16);
  };
  fn(p_.lm_head, &p_.lm_head_bf16);
  for (LayerParams& l : p_.layers) {
    for (auto [w, w16] : {std::pair{l.qkv_w, &l.qkv_w_bf16}, std::pair{l.out_w, &l.out_w_bf16},
                          std::pair{l.mla.q_w, &l.mla.q_w_bf16}, std::pair{l.mla.q_a_w, &l.mla.q_a_w_bf16},
                          std::pair{l.mla.q_b_w, &l.mla.q_b_w_bf16}, std::pair{l.mla.kv_a_w, &l.mla.kv_a_w_bf16},
                          std::pair{l.mla.kv_b_w, &l.mla.kv_b_w_bf16}})
      if (w) fn(w, w16);
    ffn(l.mlp);
    ffn(l.shared);
    ffn(l.residual);
    for (FfnParams& e : l.experts) ffn(e);
  }
}

// The tensors for_each_linear visits: [tensor index].
std::vector<bool> Model::linear_tensors() {
  const float* base = params_.f();
  std::set<size_t> offsets;
  for_each_linear([&](const float* w, const uint16_t**) { offsets.insert(static_cast<size_t>(w - base)); });
  std::vector<bool> linear(layout_.tensors().size(), false);
  for (size_t i = 0; i < linear.size(); ++i) linear[i] = offsets.count(layout_.tensors()[i].offset) > 0;
  return linear;
}

// Points every linear weight's *_bf16 at its place in the bf16 arena and records the ranges to refresh.
void Model::bind_bf16_weights() {
  params_bf16_.reserve(be_, layout_.total());
  const float* base = params_.f();
  for_each_linear([&](const float* w, const uint16_t** w16) { *w16 = params_bf16_.u16() + (w - base); });
  bf16_copied_ = linear_tensors();
  plan_bf16_copies();
}

// Expert ranges are in layout order (ascending offsets): the last starting at or before offset.
// The ranges the refresh converts and the frozen weights the backend may keep laid out. With the experts
// elsewhere (an ExpertAccess that offloads them) their arena copies are never read: an offloaded expert gets its
// bf16 copy from its own fp32 weights where it computes, so the arena's expert ranges are left out (and their
// pages never touched).
void Model::plan_bf16_copies() {
  check(!weights_handed_back_ && answered_count_ == 0,
        "model: a generation session's model cannot change where its experts are computed once weights are laid out");
  if (dtype_ == ComputeDtype::F32) return plan_fp32_layouts();
  params_bf16_.forget_kept();
  bf16_ranges_.clear();
  bf16_trained_ranges_.clear();
  kept_linears_.clear();
  // Tensors are laid out in order, 16-float aligned: adjacent ones (an expert's matrices, consecutive experts)
  // merge into one range.
  auto extend = [](std::vector<std::pair<size_t, size_t>>& ranges, size_t offset, size_t floats) {
    if (!ranges.empty() && ranges.back().first + ranges.back().second == offset) ranges.back().second += floats;
    else ranges.emplace_back(offset, floats);
  };
  std::vector<std::pair<size_t, size_t>> frozen;
  bf16_planned_.assign(layout_.tensors().size(), false);
  for (size_t i = 0; i < layout_.tensors().size(); ++i) {
    const ParamTensor& t = layout_.tensors()[i];
    if (!bf16_copied_[i] || (experts_apart_ && layout_.in_expert_range(t.offset))) continue;
    bf16_planned_[i] = true;
    const size_t padded = (t.numel + 15) / 16 * 16;
    extend(bf16_ranges_, t.offset, padded);
    const bool frozen_here = inference_only_ || !trainable_.trains(i);
    extend(frozen_here ? frozen : bf16_trained_ranges_, t.offset, padded);
    if (frozen_here && t.shape.size() == 2)
      kept_linears_.push_back({t.offset, static_cast<int>(t.shape[1]), static_cast<int>(t.shape[0])});
  }
  // Frozen weights (a LoRA or ESFT run's base, or every weight of a model that only answers) are read by every step
  // and never change: the backend may keep them in its own layout, made once. Trained ones change every step and
  // are read about once in between, where keeping a second layout only adds its memory and the traffic of writing it.
  for (auto [offset, count] : frozen) params_bf16_.keep(offset, count);
  bf16_stale_ = true;
}

// An answering fp32 model's weights to lay out: every linear weight but those of experts held elsewhere.
void Model::plan_fp32_layouts() {
  fp32_planned_.assign(layout_.tensors().size(), false);
  if (!inference_only_) return;
  const std::vector<bool> linear = linear_tensors();
  for (size_t i = 0; i < linear.size(); ++i)
    fp32_planned_[i] = linear[i] && !(experts_apart_ && layout_.in_expert_range(layout_.tensors()[i].offset));
}

size_t Model::bf16_copy_bytes(bool experts) const {
  size_t floats = 0;
  for (size_t i = 0; i < layout_.tensors().size() && i < bf16_copied_.size(); ++i) {
    const ParamTensor& t = layout_.tensors()[i];
    if (bf16_copied_[i] && (experts || !layout_.in_expert_range(t.offset))) floats += (t.numel + 15) / 16 * 16;
  }
  return floats * sizeof(uint16_t);
}

void Model::refresh_bf16_weights() {
  check(!weights_handed_back_,
        "model: its weights changed after its linear weights were laid out for answering and their fp32 and bf16 "
        "copies handed back (a generation session's model cannot be written)");
  if (inference_only_) return refresh_for_answering();
  const bool all = bf16_stale_;
  for (auto [offset, count] : all ? bf16_ranges_ : bf16_trained_ranges_)
    be_.to_bf16(params_bf16_.u16() + offset, params_.f() + offset, static_cast<int64_t>(count));
  // The frozen weights changed (a load or an init): laid out now, all at once, rather than at each one's first
  // use, which for a sparse MoE's experts would stall the steps that first route to them, over many steps.
  if (all)
    for (const KeptLinear& k : kept_linears_) be_.prepare_bf16_weight(params_bf16_.u16() + k.offset, k.I, k.O, true);
  bf16_stale_ = bf16_trained_stale_ = false;
}

void Model::init(uint64_t seed, bool experts) {
  if (experts && be_.device_memory_is_host()) return init_range(seed, 0, layout_.total());
  size_t from = 0;
  for (const ExpertRange& r : layout_.expert_ranges()) {
    init_range(seed, from, experts ? r.end : r.begin);
    from = r.end;
  }
  init_range(seed, from, layout_.total());
}

void Model::init_range(uint64_t seed, size_t begin, size_t end) {
  if (end <= begin) return;
  check(answered_count_ == 0, "model: an answering model's weights cannot be drawn once some are laid out");
  float* dst = params_.f() + begin;
  if (be_.device_memory_is_host()) {
    init_params(layout_, dst, begin, end, seed, be_.threads());
  } else {
    std::vector<float> host(end - begin, 0.0f);  // the layout's padding stays zero
    init_params(layout_, host.data(), begin, end, seed, be_.threads());
    be_.copy(dst, host.data(), host.size() * sizeof(float));
  }
  bf16_stale_ = true;
}

void Model::zero_grads() { grads_.zero(); }

void Model::zero_dense_grads() {
  size_t from = 0;
  for (const ExpertRange& r : trainable_.grad_expert_ranges()) {
    be_.zero(grads_.f() + from, (r.begin - from) * sizeof(float));
    from = r.end;
  }
  be_.zero(grads_.f() + from, (trainable_.grad_total() - from) * sizeof(float));
}

std::vector<bool> Model::bf16_only_tensors() const {
  std::vector<bool> only = bf16_copied_;
  const float* fp32_read = p_.wte;
  for (size_t i = 0; i < only.size(); ++i)
    if (params_.f() + layout_.tensors()[i].offset == fp32_read) only[i] = false;
  return only;
}

// Tensor i, planned, from its values at src (its fp32 weight in the arena, or a load's buffer): laid out by the
// backend where it keeps layouts (bf16: else its copy is written, and laid out where it can be); the fp32 weight is
// then handed back unless something still reads it (the embedding lookup; an fp32 product without a layout), and
// a load's values go to the arena where it is kept.
void Model::answer_with(size_t i, const float* src) {
  const ParamTensor& t = layout_.tensors()[i];
  const size_t padded = (t.numel + 15) / 16 * 16;
  float* weight = params_.f() + t.offset;
  const bool linear = t.shape.size() == 2;
  const int I = linear ? static_cast<int>(t.shape[1]) : 0, O = linear ? static_cast<int>(t.shape[0]) : 0;
  bool replaced = true;  // the products read something other than the fp32 weight from now on
  if (dtype_ == ComputeDtype::F32) {
    replaced = linear && weight != p_.wte && be_.lay_out_weight(weight, src, I, O);
  } else {
    uint16_t* copy = params_bf16_.u16() + t.offset;
    if (!linear || !be_.lay_out_bf16_weight(copy, src, I, O)) {
      be_.to_bf16(copy, src, static_cast<int64_t>(t.numel));  // the copy's padding stays zero
      if (linear) be_.prepare_bf16_weight(copy, I, O, false);
    }
  }
  const bool kept = !replaced || weight == p_.wte;
  if (kept && src != weight) std::copy_n(src, t.numel, weight);
  if (!kept && src == weight) be_.discard(weight, padded * sizeof(float));
  answered_[i] = true;
  ++answered_count_;
}

void Model::refresh_for_answering() {
  const std::vector<bool>& planned = dtype_ == ComputeDtype::BF16 ? bf16_planned_ : fp32_planned_;
  for (size_t i = 0; i < layout_.tensors().size(); ++i)
    if (planned[i] && !answered_[i]) answer_with(i, params_.f() + layout_.tensors()[i].offset);
  bf16_stale_ = bf16_trained_stale_ = false;
  weights_handed_back_ = true;
}

// Tensor i is laid out as its load reads it: planned, and, under a fine-tune, frozen (a PEFT adapter read next may
// still write the trained ones).
bool Model::lays_out_at_load(size_t i) const {
  const std::vector<bool>& planned = dtype_ == ComputeDtype::BF16 ? bf16_planned_ : fp32_planned_;
  return planned[i] && !answered_[i] && (trainable_.everything() || !trainable_.trains(i));
}

// The tensors lying wholly inside [begin, end) (layout order is offset order): [first, last) tensor indices.
std::pair<size_t, size_t> Model::tensors_within(size_t begin, size_t end) const {
  const std::vector<ParamTensor>& ts = layout_.tensors();
  auto it = std::lower_bound(ts.begin(), ts.end(), begin, [](const ParamTensor& t, size_t at) { return t.offset < at; });
  const size_t first = static_cast<size_t>(it - ts.begin());
  size_t last = first;
  while (last < ts.size() && ts[last].offset + ts[last].numel <= end) ++last;
  return {first, last};
}

bool Model::lays_out_any(size_t begin, size_t end) const {
  if (!lays_out_while_loading()) return false;
  const auto [first, last] = tensors_within(begin, end);
  for (size_t i = first; i < last; ++i)
    if (lays_out_at_load(i)) return true;
  return false;
}

void Model::weights_loaded(size_t begin, size_t end, const float* values) {
  check(lays_out_while_loading(), "model: a load handed its values to a model that does not lay them out");
  const auto [first, last] = tensors_within(begin, end);
  for (size_t i = first; i < last; ++i) {
    const ParamTensor& t = layout_.tensors()[i];
    const float* src = values + (t.offset - begin);
    if (lays_out_at_load(i)) answer_with(i, src);
    else std::copy_n(src, t.numel, params_.f() + t.offset);
  }
}

void Model::set_inference_only() {
  if (inference_only_) return;
  inference_only_ = true;
  answered_.assign(layout_.tensors().size(), false);
  plan_bf16_copies();
}

void Model::set_expert_access(ExpertAccess* access) {
  expert_access_ = access;
  if (experts_apart_ == (access != nullptr)) return;
  experts_apart_ = access != nullptr;
  if (dtype_ == ComputeDtype::BF16 || inference_only_) plan_bf16_copies();
}

void Model::reserve_activations(int B, int T) {
  if (B == B_ && T == T_) return;
  check(T <= cfg_.max_seq_len, "sequence length " + std::to_string(T) + " exceeds model.max_seq_len " +
                                   std::to_string(cfg_.max_seq_len));
  B_ = B;
  T_ = T;
  const size_t N = (size_t)B * T, C = cfg_.d_model, V = cfg_.vocab_size;
  tokens_.reserve(be_, N * sizeof(int32_t));
  targets_.reserve(be_, N * sizeof(int32_t));
  resid_.resize(cfg_.n_layers + 1);
  for (auto& r : resid_) reserve_floats(be_, r, N * C);
  acts_.resize(cfg_.n_layers);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    LayerActs& a = acts_[l];
    for (DeviceBuffer* b : {&a.ln1, &a.x_mid, &a.ln2, &a.ffn_out}) reserve_floats(be_, *b, N * C);
    for (DeviceBuffer* b : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) reserve_floats(be_, *b, N);
    if (latent()) mla_.reserve(be_, a.mla, mla_scratch_, B, T);
    else attention_.reserve(be_, a.attn, attn_scratch_, B, T);
    if (!cfg_.is_moe_layer(l)) {
      FfnShape fs{cfg_.d_model, cfg_.d_ff, features_.activation, (float)cfg_.swiglu_alpha, (float)cfg_.swiglu_limit};
      reserve_floats(be_, a.h, N * fs.in_rows());
      reserve_floats(be_, a.act, N * fs.F);
    }
  }
  for (DeviceBuffer* b : {&lnf_, &dresid_, &dtmp2_}) reserve_floats(be_, *b, N * C);
  reserve_floats(be_, dtmp_, N * std::max<size_t>(C, cfg_.attn_width()));  // also the attention output's gradient
  for (DeviceBuffer* b : {&lnf_mean_, &lnf_rstd_, &losses_}) reserve_floats(be_, *b, N);
  reserve_floats(be_, logits_, N * V);
  reserve_floats(be_, dlogits_, N * V);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    if (cfg_.is_moe_layer(l)) continue;
    const FfnShape fs{cfg_.d_model, cfg_.d_ff, features_.activation, (float)cfg_.swiglu_alpha, (float)cfg_.swiglu_limit};
    reserve_floats(be_, scratch_.c, N * fs.in_rows());
    reserve_floats(be_, scratch_.d, N * fs.F);
  }
  for (auto& layer : moe_layers_) layer->reserve(be_, static_cast<int>(N), scratch_);
}

size_t Model::activation_bytes() const {
  size_t total = 0;
  for (const DeviceBuffer* b : {&tokens_, &targets_, &lnf_, &lnf_mean_, &lnf_rstd_, &logits_, &losses_, &dresid_,
                                &dtmp_, &dtmp2_, &dlogits_, &scratch_.a, &scratch_.b, &scratch_.c, &scratch_.d,
                                &scratch_.e})
    total += b->bytes();
  total += attn_scratch_.bytes() + mla_scratch_.bytes();
  for (const DeviceBuffer& r : resid_) total += r.bytes();
  for (const LayerActs& a : acts_) {
    for (const DeviceBuffer* b : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.x_mid, &a.ln2, &a.ln2_mean, &a.ln2_rstd,
                                  &a.ffn_out, &a.h, &a.act})
      total += b->bytes();
    total += a.attn.bytes() + a.mla.bytes();
  }
  for (const auto& layer : moe_layers_) total += layer->buffer_bytes();
  return total;
}

void Model::norm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N) {
  switch (features_.norm) {
    case NormKind::LayerNorm:
      be_.layernorm_forward(out, mean, rstd, x, w, b, N, cfg_.d_model, (float)cfg_.norm_eps);
      return;
    case NormKind::RmsNorm: be_.rmsnorm_forward(out, rstd, x, w, N, cfg_.d_model, (float)cfg_.norm_eps); return;
  }
}

void Model::norm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                          const float* mean, const float* rstd, int N) {
  switch (features_.norm) {
    case NormKind::LayerNorm: be_.layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, cfg_.d_model); return;
    case NormKind::RmsNorm: be_.rmsnorm_backward(dx, dw, dout, x, w, rstd, N, cfg_.d_model); return;
  }
}

ForwardResult Model::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  reserve_activations(B, T);
  const int N = B * T, C = cfg_.d_model, V = cfg_.vocab_size;
  for (int i = 0; i < N; ++i)
    if (inputs[i] < 0 || inputs[i] >= V)
      fail("token " + std::to_string(inputs[i]) + " at position " + std::to_string(i) +
           " is outside the vocabulary [0, " + std::to_string(V) + ")");
  prepare_weights();
  be_.copy(tokens_.i32(), inputs, N * sizeof(int32_t));
  be_.embedding_forward(resid_[0].f(), tokens_.i32(), p_.wte, p_.wpe, B, T, C);

  ForwardResult r;
  for (int l = 0; l < cfg_.n_layers; ++l) r.aux_loss += layer_forward(l, B, T);
  norm_forward(lnf_.f(), lnf_mean_.f(), lnf_rstd_.f(), resid_[cfg_.n_layers].f(), p_.norm_f_w, p_.norm_f_b, N);
  linear_forward(be_, logits_.f(), lnf_.f(), p_.lm_head, p_.lm_head_bf16, nullptr, N, C, V);

  has_targets_ = targets != nullptr;
  n_targets_ = 0;
  if (has_targets_) {
    for (int i = 0; i < N; ++i) {
      if (targets[i] >= V)
        fail("target " + std::to_string(targets[i]) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(V) + ")");
      n_targets_ += targets[i] >= 0;
    }
    be_.copy(targets_.i32(), targets, N * sizeof(int32_t));
    be_.crossentropy_forward(losses_.f(), logits_.f(), targets_.i32(), N, V);
    std::vector<float> losses(N);
    be_.copy(losses.data(), losses_.f(), N * sizeof(float));
    double sum = 0;
    for (float x : losses) sum += x;
    r.loss = n_targets_ ? sum / n_targets_ : 0.0;
    r.targets = n_targets_;
  }
  return r;
}

double Model::layer_forward(int l, int B, int T) {
  const int N = B * T, C = cfg_.d_model;
  const LayerParams& p = p_.layers[l];
  LayerActs& a = acts_[l];
  const float* x = resid_[l].f();
  norm_forward(a.ln1.f(), a.ln1_mean.f(), a.ln1_rstd.f(), x, p.norm1_w, p.norm1_b, N);
  if (latent()) mla_.forward(be_, p, a.mla, a.x_mid.f(), a.ln1.f(), B, T);
  else attention_.forward(be_, p, a.attn, a.x_mid.f(), a.ln1.f(), B, T);
  be_.accumulate(a.x_mid.f(), x, (int64_t)N * C);
  norm_forward(a.ln2.f(), a.ln2_mean.f(), a.ln2_rstd.f(), a.x_mid.f(), p.norm2_w, p.norm2_b, N);

  double aux = 0;
  if (cfg_.is_moe_layer(l)) {
    const int32_t* forced = nullptr;
    if (routing_skew_) {
      MoeLayer& layer = *moe_layers_[cfg_.moe_index(l)];
      const int E = layer.shape().E, K = layer.shape().K;
      skew_picks_.resize(static_cast<size_t>(N) * K);
      draw_skewed_routing(*routing_skew_, routing_draw_, l, N, E, K, skew_picks_.data());
      forced_topk_.reserve(be_, skew_picks_.size() * sizeof(int32_t));
      be_.copy(forced_topk_.i32(), skew_picks_.data(), skew_picks_.size() * sizeof(int32_t));
      forced = forced_topk_.i32();
    }
    RouterLosses rl =
        moe_layers_[cfg_.moe_index(l)]->forward(be_, p, experts(), a.ffn_out.f(), a.ln2.f(), N, forced);
    aux = cfg_.aux_loss_coef * rl.aux + cfg_.z_loss_coef * rl.z;
  } else {
    FfnShape fs{C, cfg_.d_ff, features_.activation, (float)cfg_.swiglu_alpha, (float)cfg_.swiglu_limit};
    ffn_forward(be_, p.mlp, fs, a.ffn_out.f(), a.ln2.f(), a.h.f(), a.act.f(), N);
  }
  be_.add_forward(resid_[l + 1].f(), a.x_mid.f(), a.ffn_out.f(), (int64_t)N * C);
  return aux;
}

void Model::backward(float loss_scale) {
  check(B_ > 0, "backward() called before forward()");
  const int N = B_ * T_, C = cfg_.d_model, V = cfg_.vocab_size;
  dlogits_.zero();
  if (has_targets_ && n_targets_ > 0)
    be_.crossentropy_backward(dlogits_.f(), logits_.f(), targets_.i32(), loss_scale / (float)n_targets_, N, V);
  dtmp_.zero();
  linear_backward(be_, dtmp_.f(), g_.lm_head, nullptr, dlogits_.f(), lnf_.f(), p_.lm_head, p_.lm_head_bf16, N, C, V);
  dresid_.zero();
  norm_backward(dresid_.f(), g_.norm_f_w, g_.norm_f_b, dtmp_.f(), resid_[cfg_.n_layers].f(), p_.norm_f_w,
                lnf_mean_.f(), lnf_rstd_.f(), N);
  for (int l = cfg_.n_layers - 1; l >= 0; --l) layer_backward(l, B_, T_, loss_scale);
  if (g_.wte) be_.embedding_backward(g_.wte, g_.wpe, dresid_.f(), tokens_.i32(), B_, T_, C);  // wte and wpe train together
}

void Model::layer_backward(int l, int B, int T, float loss_scale) {
  const int N = B * T, C = cfg_.d_model;
  const LayerParams& p = p_.layers[l];
  const LayerParams& g = g_.layers[l];
  LayerActs& a = acts_[l];
  float* dres = dresid_.f();

  // Feed-forward sublayer: resid[l+1] = x_mid + ffn(norm2(x_mid)).
  dtmp_.zero();
  if (cfg_.is_moe_layer(l)) {
    moe_layers_[cfg_.moe_index(l)]->backward(be_, p, g, experts(), dtmp_.f(), dres, a.ln2.f(), N,
                                             loss_scale * (float)cfg_.aux_loss_coef,
                                             loss_scale * (float)cfg_.z_loss_coef, scratch_);
  } else {
    FfnShape fs{C, cfg_.d_ff, features_.activation, (float)cfg_.swiglu_alpha, (float)cfg_.swiglu_limit};
    reserve_floats(be_, scratch_.c, (size_t)N * fs.in_rows());
    reserve_floats(be_, scratch_.d, (size_t)N * fs.F);
    ffn_backward(be_, p.mlp, g.mlp, fs, dtmp_.f(), dres, a.ln2.f(), a.h.f(), a.act.f(), scratch_.c.f(),
                 scratch_.d.f(), N);
  }
  norm_backward(dres, g.norm2_w, g.norm2_b, dtmp_.f(), a.x_mid.f(), p.norm2_w, a.ln2_mean.f(), a.ln2_rstd.f(), N);

  // Attention sublayer: x_mid = x + attention(norm1(x)).
  dtmp2_.zero();
  if (latent()) mla_.backward(be_, p, g, a.mla, mla_scratch_, dtmp_.f(), dtmp2_.f(), dres, a.ln1.f(), B, T);
  else attention_.backward(be_, p, g, a.attn, attn_scratch_, dtmp_.f(), dtmp2_.f(), dres, a.ln1.f(), B, T);
  norm_backward(dres, g.norm1_w, g.norm1_b, dtmp2_.f(), resid_[l].f(), p.norm1_w, a.ln1_mean.f(), a.ln1_rstd.f(), N);
}

}  // namespace moe
