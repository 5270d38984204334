#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/rng.h"
#include "core/threadpool.h"

namespace moe {

ParamLayout::ParamLayout(const ModelConfig& cfg, const FinetuneConfig& finetune)
    : cfg_(cfg), features_(model_features(cfg)) {
  const int64_t C = cfg.d_model, V = cfg.vocab_size;
  const bool lora = finetune.uses_lora();
  if (lora) {
    lora_rank_ = finetune.lora.rank;
    lora_scale_ = static_cast<float>(finetune.lora.scaling());
  }
  auto targets = [&](LoraTarget t) { return lora && finetune.lora.targets_has(t); };
  const float std = static_cast<float>(cfg.init_std);
  const float out_std = static_cast<float>(cfg.init_std / std::sqrt(2.0 * cfg.n_layers));
  const bool bias = features_.linear_bias;
  add("wte", {V, C}, std);
  if (features_.position == PositionKind::Learned) add("wpe", {cfg.max_seq_len, C}, std);
  for (int l = 0; l < cfg.n_layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    add(p + "norm1.weight", {C}, 0, true);
    if (bias) add(p + "norm1.bias", {C}, 0);
    if (features_.attention == AttentionKind::Latent) {
      add_latent_attention(p);
    } else {
      add(p + "attn.qkv.weight", {cfg.qkv_width(), C}, std);
      if (features_.qkv_bias) add(p + "attn.qkv.bias", {cfg.qkv_width()}, 0);
    }
    if (features_.qk_norm != QkNorm::None) {
      const bool head = features_.qk_norm == QkNorm::Head;
      const int64_t HS = cfg.head_size();
      add(p + "attn.q_norm.weight", {head ? HS : cfg.n_heads * HS}, 0, true);
      add(p + "attn.k_norm.weight", {head ? HS : cfg.n_kv_heads * HS}, 0, true);
    }
    add(p + "attn.out.weight", {C, cfg.attn_width()}, out_std);
    if (features_.has_out_bias()) add(p + "attn.out.bias", {C}, 0);
    // gpt-oss initialises its sinks like its weights (normal, initializer_range).
    if (features_.attention_sinks) add(p + "attn.sinks", {cfg.n_heads}, std);
    if (targets(LoraTarget::Attention)) {
      if (features_.attention == AttentionKind::Latent) {
        add_latent_attention_lora(p);
      } else {
        const int64_t HS = cfg.head_size(), q = cfg.n_heads * HS, kv = cfg.n_kv_heads * HS;
        add_lora(p + "attn.q", p + "attn.qkv.weight", 0, q);
        add_lora(p + "attn.k", p + "attn.qkv.weight", q, kv);
        add_lora(p + "attn.v", p + "attn.qkv.weight", q + kv, kv);
      }
      add_lora(p + "attn.out", p + "attn.out.weight", 0, C);
    }
    add(p + "norm2.weight", {C}, 0, true);
    if (bias) add(p + "norm2.bias", {C}, 0);
    if (!cfg.is_moe_layer(l)) {
      add_ffn(p + "mlp.", cfg.d_ff, out_std, targets(LoraTarget::DenseMlp));
      continue;
    }
    const int E = cfg.experts_at(l);
    add(p + "moe.router.weight", {E, C}, std);
    if (features_.router_bias) add(p + "moe.router.bias", {E}, 0);
    // Chooses experts only (no gradient reaches it; AdamW leaves a tensor with zero gradient and no decay as
    // it is): moved by aux-loss-free balancing, or loaded (DeepSeek-V3).
    if (cfg.selection_bias) add(p + "moe.router.selection_bias", {E}, 0);
    for (int e = 0; e < E; ++e) {
      size_t begin = total_;
      add_ffn(p + "moe.experts." + std::to_string(e) + ".", cfg.expert_d_ff, out_std,
              targets(LoraTarget::Experts) && finetune.expert_selected(l, e));
      experts_.push_back({l, e, begin, total_});
    }
    if (features_.shared_expert)
      add_ffn(p + "moe.shared.", cfg.shared_expert_d_ff, out_std, targets(LoraTarget::SharedExperts));
    if (features_.shared_expert_gate) add(p + "moe.shared_gate.weight", {1, C}, std);
    if (features_.residual_mlp) add_ffn(p + "moe.residual.", cfg.d_ff, out_std, targets(LoraTarget::DenseMlp));
  }
  add("norm_f.weight", {C}, 0, true);
  if (bias) add("norm_f.bias", {C}, 0);
  if (!features_.tie_embeddings) add("lm_head.weight", {V, C}, std);
}

bool ParamLayout::in_expert_range(size_t offset) const {
  auto it = std::upper_bound(experts_.begin(), experts_.end(), offset,
                             [](size_t o, const ExpertRange& r) { return o < r.begin; });
  return it != experts_.begin() && offset < std::prev(it)->end;
}

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape, float init_std, bool init_one) {
  ParamTensor t;
  t.name = name;
  t.numel = 1;
  for (int64_t d : shape) t.numel *= static_cast<size_t>(d);
  t.shape = std::move(shape);
  t.offset = total_;
  t.decay = t.shape.size() >= 2;
  t.init_std = init_std;
  t.init_one = init_one;
  // Keep every tensor 64-byte aligned so vector kernels can assume it.
  total_ += (t.numel + 15) / 16 * 16;
  index_[name] = tensors_.size();
  tensors_.push_back(std::move(t));
}

void ParamLayout::add_latent_attention(const std::string& p) {
  const LatentAttentionConfig& a = cfg_.latent;
  const int64_t C = cfg_.d_model, NH = cfg_.n_heads, q_rows = NH * a.qk_head_dim();
  const float std = static_cast<float>(cfg_.init_std);
  if (a.q_lora_rank == 0) {
    add(p + "attn.q.weight", {q_rows, C}, std);
  } else {
    add(p + "attn.q_a.weight", {a.q_lora_rank, C}, std);
    add(p + "attn.q_a_norm.weight", {a.q_lora_rank}, 0, true);
    add(p + "attn.q_b.weight", {q_rows, a.q_lora_rank}, std);
  }
  add(p + "attn.kv_a.weight", {a.kv_lora_rank + a.qk_rope_head_dim, C}, std);
  add(p + "attn.kv_a_norm.weight", {a.kv_lora_rank}, 0, true);
  add(p + "attn.kv_b.weight", {NH * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank}, std);
}

// One adapter per latent-attention projection, as PEFT adapts each of DeepSeek's Linears (q_proj or q_a_proj and
// q_b_proj, kv_a_proj_with_mqa whole, kv_b_proj); kv_a's adapter spans both its latent and rope-key rows.
void ParamLayout::add_latent_attention_lora(const std::string& p) {
  for (const char* m : {"attn.q", "attn.q_a", "attn.q_b", "attn.kv_a", "attn.kv_b"}) {
    const std::string base = p + m + ".weight";
    if (const ParamTensor* t = find(base)) add_lora(p + m, base, 0, t->shape[0]);
  }
}

void ParamLayout::add_ffn(const std::string& prefix, int F, float out_std, bool lora) {
  const int64_t C = cfg_.d_model;
  const float std = static_cast<float>(cfg_.init_std);
  // A gated activation (SwiGLU) computes gate and up in one in-projection of 2F rows; each has its own adapter,
  // as the Hugging Face modules gate_proj and up_proj do.
  if (features_.gated_ffn()) {
    add(prefix + "gate_up.weight", {2 * static_cast<int64_t>(F), C}, std);
    if (features_.has_ffn_bias()) add(prefix + "gate_up.bias", {2 * static_cast<int64_t>(F)}, 0);
    add(prefix + "down.weight", {C, F}, out_std);
    if (features_.has_ffn_bias()) add(prefix + "down.bias", {C}, 0);
    if (!lora) return;
    add_lora(prefix + "gate", prefix + "gate_up.weight", 0, F);
    add_lora(prefix + "up", prefix + "gate_up.weight", F, F);
    add_lora(prefix + "down", prefix + "down.weight", 0, C);
  } else {
    add(prefix + "fc.weight", {F, C}, std);
    if (features_.has_ffn_bias()) add(prefix + "fc.bias", {F}, 0);
    add(prefix + "proj.weight", {C, F}, out_std);
    if (features_.has_ffn_bias()) add(prefix + "proj.bias", {C}, 0);
    if (!lora) return;
    add_lora(prefix + "fc", prefix + "fc.weight", 0, F);
    add_lora(prefix + "proj", prefix + "proj.weight", 0, C);
  }
}

// A as PEFT initialises it by default (kaiming_uniform_ with a = sqrt(5): uniform with bound 1/sqrt(fan_in)),
// B zero, so a fresh adapter leaves the model's output exactly as it was.
void ParamLayout::add_lora(const std::string& module, const std::string& base, int64_t row0, int64_t rows) {
  LoraAdapter a;
  a.module = module;
  a.base = index_.at(base);
  a.row0 = row0;
  a.rows = rows;
  a.cols = tensors_[a.base].shape[1];
  a.a = tensors_.size();
  add(module + ".lora_A", {lora_rank_, a.cols}, 0);
  tensors_.back().init_bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.cols)));
  tensors_.back().adapter = true;
  a.b = tensors_.size();
  add(module + ".lora_B", {rows, lora_rank_}, 0);
  tensors_.back().adapter = true;
  adapters_.push_back(std::move(a));
}

const ParamTensor* ParamLayout::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

ModelParams ParamLayout::bind(float* arena) const {
  return bind_with([&](const std::string& name) -> float* {
    const ParamTensor* t = find(name);
    return t ? arena + t->offset : nullptr;
  });
}

ModelParams ParamLayout::bind(float* arena, const std::vector<size_t>& offsets) const {
  check(offsets.size() == tensors_.size(), "ParamLayout::bind: one offset per tensor expected");
  return bind_with([&](const std::string& name) -> float* {
    auto it = index_.find(name);
    if (it == index_.end() || offsets[it->second] == SIZE_MAX) return nullptr;
    return arena + offsets[it->second];
  });
}

template <typename Ptr>
ModelParams ParamLayout::bind_with(const Ptr& ptr) const {
  auto lora = [&](const std::string& module) {
    LoraParams l;
    l.A = ptr(module + ".lora_A");
    l.B = ptr(module + ".lora_B");
    if (const ParamTensor* a = find(module + ".lora_A")) {
      l.r = lora_rank_;
      l.scale = lora_scale_;
      l.stream = a->offset;
    }
    return l;
  };
  auto ffn = [&](const std::string& prefix) {
    FfnParams f;
    const bool gated = features_.gated_ffn();
    f.lora_in[0] = lora(prefix + (gated ? "gate" : "fc"));
    if (gated) f.lora_in[1] = lora(prefix + "up");
    f.lora_out = lora(prefix + (gated ? "down" : "proj"));
    f.w_in = ptr(prefix + (gated ? "gate_up.weight" : "fc.weight"));
    f.b_in = ptr(prefix + (gated ? "gate_up.bias" : "fc.bias"));
    f.w_out = ptr(prefix + (gated ? "down.weight" : "proj.weight"));
    f.b_out = ptr(prefix + (gated ? "down.bias" : "proj.bias"));
    return f;
  };
  ModelParams m;
  m.wte = ptr("wte");
  m.wpe = ptr("wpe");
  m.norm_f_w = ptr("norm_f.weight");
  m.norm_f_b = ptr("norm_f.bias");
  m.lm_head = features_.tie_embeddings ? m.wte : ptr("lm_head.weight");
  for (int l = 0; l < cfg_.n_layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    LayerParams lp;
    lp.norm1_w = ptr(p + "norm1.weight");
    lp.norm1_b = ptr(p + "norm1.bias");
    lp.qkv_w = ptr(p + "attn.qkv.weight");
    lp.qkv_b = ptr(p + "attn.qkv.bias");
    lp.q_norm_w = ptr(p + "attn.q_norm.weight");
    lp.k_norm_w = ptr(p + "attn.k_norm.weight");
    lp.out_w = ptr(p + "attn.out.weight");
    lp.lora_q = lora(p + "attn.q");
    lp.lora_k = lora(p + "attn.k");
    lp.lora_v = lora(p + "attn.v");
    lp.lora_out = lora(p + "attn.out");
    lp.mla.q_w = ptr(p + "attn.q.weight");
    lp.mla.q_a_w = ptr(p + "attn.q_a.weight");
    lp.mla.q_a_norm_w = ptr(p + "attn.q_a_norm.weight");
    lp.mla.q_b_w = ptr(p + "attn.q_b.weight");
    lp.mla.kv_a_w = ptr(p + "attn.kv_a.weight");
    lp.mla.kv_a_norm_w = ptr(p + "attn.kv_a_norm.weight");
    lp.mla.kv_b_w = ptr(p + "attn.kv_b.weight");
    lp.mla.lora_q_a = lora(p + "attn.q_a");
    lp.mla.lora_q_b = lora(p + "attn.q_b");
    lp.mla.lora_kv_a = lora(p + "attn.kv_a");
    lp.mla.lora_kv_b = lora(p + "attn.kv_b");
    lp.out_b = ptr(p + "attn.out.bias");
    lp.attn_sinks = ptr(p + "attn.sinks");
    lp.window = cfg_.window_at(l);
    lp.norm2_w = ptr(p + "norm2.weight");
    lp.norm2_b = ptr(p + "norm2.bias");
    if (cfg_.is_moe_layer(l)) {
      lp.router_w = ptr(p + "moe.router.weight");
      lp.router_b = ptr(p + "moe.router.bias");
      lp.router_selection_bias = ptr(p + "moe.router.selection_bias");
      for (int e = 0; e < cfg_.experts_at(l); ++e) lp.experts.push_back(ffn(p + "moe.experts." + std::to_string(e) + "."));
      if (features_.shared_expert) lp.shared = ffn(p + "moe.shared.");
      lp.shared_gate_w = ptr(p + "moe.shared_gate.weight");
      if (features_.residual_mlp) lp.residual = ffn(p + "moe.residual.");
    } else {
      lp.mlp = ffn(p + "mlp.");
    }
    m.layers.push_back(std::move(lp));
  }
  return m;
}

void init_params(const ParamLayout& layout, float* arena, uint64_t seed, int threads) {
  init_params(layout, arena, 0, layout.total(), seed, threads);
}

void init_params(const ParamLayout& layout, float* dst, size_t begin, size_t end, uint64_t seed, int threads) {
  constexpr int64_t kPerThreadMin = int64_t(1) << 20;
  ThreadPool tp(std::max(threads, 1));
  const std::vector<ParamTensor>& all = layout.tensors();  // in offset order
  auto first = std::lower_bound(all.begin(), all.end(), begin,
                                [](const ParamTensor& t, size_t at) { return t.offset < at; });
  for (auto it = first; it != all.end() && it->offset < end; ++it) {
    const ParamTensor& t = *it;
    float* p = dst + (t.offset - begin);
    uint64_t stream = 0xcbf29ce484222325ull;  // FNV-1a of the name: a stable per-tensor stream
    for (char c : t.name) stream = (stream ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    tp.parallel_for(static_cast<int64_t>(t.numel), [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i)
        p[i] = t.init_one           ? 1.0f
               : t.init_bound > 0 ? t.init_bound * (2.0f * random_uniform(seed, stream, i) - 1.0f)
               : t.init_std > 0   ? t.init_std * random_normal(seed, stream, i)
                                  : 0.0f;
    }, kPerThreadMin);
  }
}

}  // namespace moe
