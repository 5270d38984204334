// Run configuration: the model shape and the training hyper-parameters, parsed once from JSON and
// validated field by field (an error names the field, e.g. "model.top_k"). See docs/model.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "devices/device_group_config.h"
#include "model/features.h"  // QkNorm
#include "model/config_sections.h"
#include "model/finetune_config.h"
#include "pipeline/pipeline_config.h"
#include "placement/placement.h"

namespace moe {

// Precision of the linear layers' matrix products. fp32: everything in fp32 (the default, the exact reference).
// bf16: their operands rounded to bf16, products accumulated in fp32 (sgemm_bf16), against bf16 copies of the
// weights refreshed from the fp32 masters; gradients, optimizer state and checkpoints stay fp32.
enum class ComputeDtype { F32, BF16 };

struct ModelConfig {
  std::string family = "gpt-moe";  // model.arch: a row of model_families() (model/features.h)
  int vocab_size = 256, d_model = 256, n_layers = 4, n_heads = 4, n_kv_heads = 4, max_seq_len = 256;
  int d_ff = 1024, expert_d_ff = 1024;
  std::vector<int> n_experts;  // one entry per MoE layer
  int top_k = 2, moe_every = 1;
  // Layers that are dense although moe_every makes them MoE (Qwen's mlp_only_layers, DeepSeek's first
  // first_k_dense_replace layers); sorted, distinct.
  std::vector<int> dense_layers;
  int head_dim = 0;  // 0: d_model / n_heads; else the attention's head size, so NH·HS may differ from C
  bool renormalize = true;
  double routed_scaling = 1.0;  // model.routed_scaling_factor: the K combine weights are multiplied by it
  bool selection_bias = false;  // a per-expert bias on the router's scores that only chooses (layers.L.moe.router.selection_bias)
  int shared_expert_d_ff = 0;
  bool shared_expert_gate = false, residual_mlp = false;
  double aux_loss_coef = 0.01, z_loss_coef = 0.0;
  double capacity_factor = 0.0;  // 0: dropless (JSON null)
  double rope_theta = 10000.0, norm_eps = 1e-5;
  bool tie_embeddings = true;  // defaults: the family's
  bool qkv_bias = true;        // bias on the qkv projection (gpt-moe, Qwen2-MoE)
  // model.out_bias: adds a bias on the attention out-projection to a family without one (Qwen3-MoE's
  // attention_bias puts biases on q/k/v and o); families that have one (gpt-moe, gpt-oss) always keep it.
  bool out_bias = false;
  // model.qk_norm: RMSNorm on q and k before rope, "none", "projection" (OLMoE) or "head" (Qwen3); weights
  // layers.L.attn.q_norm.weight and k_norm.weight.
  QkNorm qk_norm = QkNorm::None;
  double clip_qkv = 0;  // model.clip_qkv: q, k, v clamped to [-c, c] (OLMoE); 0: off (JSON null)
  // Sliding-window attention (gpt-oss): the listed layers attend to the last sliding_window keys only (the
  // query's own included); 0: every layer attends to every earlier key.
  int sliding_window = 0;
  std::vector<int> sliding_layers;  // sorted, distinct; non-empty exactly when sliding_window > 0
  // The clamped SwiGLU's sigmoid gain and clamp (FfnActivation::SwigluClamped; gpt-oss's swiglu_alpha, swiglu_limit).
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;
  double init_std = 0.02;
  LatentAttentionConfig latent;    // model.latent_attention (null: off)
  RopeScalingConfig rope_scaling;  // model.rope_scaling (null: plain RoPE)
  RouterConfig router;             // model.router (null: softmax, plain top-k)

  int head_size() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  // The attention output, the out-projection's input (latent attention: NH·v_head_dim).
  int attn_width() const { return n_heads * (latent.enabled() ? latent.v_head_dim : head_size()); }
  int qkv_width() const { return (n_heads + 2 * n_kv_heads) * head_size(); }
  // The one rule for which layers are MoE layers: every moe_every-th, except the dense_layers.
  bool is_moe_layer(int l) const;
  int moe_index(int l) const;  // MoE layers before l; valid for MoE layers
  int n_moe_layers() const;
  int experts_at(int l) const { return n_experts[moe_index(l)]; }
  int window_at(int l) const;  // the layer's sliding window; 0: full causal attention
};

// A routing-skew experiment (load balance under a controlled skew): the router's choices are replaced by seeded draws from a
// distribution, everything else in the step stays real. Off by default; the config's top-level "routing_skew"
// section, written to config.json only when on. Kept with the training settings (the trainer applies it).
enum class SkewDistribution { None, Uniform, Zipf, Hot };
struct RoutingSkew {
  SkewDistribution distribution = SkewDistribution::None;
  double zipf_s = 1.2;         // zipf: expert rank r is chosen with weight 1 / (r + 1)^s
  double hot_fraction = 0.95;  // hot: this share of tokens routes to expert 0 (its other choices uniform)
  uint64_t seed = 0;
};

// What the training loop does at a step whose loss or gradient norm is not finite (the run diverged): the step's
// update is skipped where the optimizer can skip it (resident experts), the event names the step, the quantity,
// the last finite values and the first non-finite gradient, and then the run pauses (for a look, a lower lr, a
// restart from a checkpoint), stops, or goes on to the next batch. A checkpoint never holds non-finite weights.
enum class NonFinitePolicy { Pause, Stop, Skip };

struct TrainConfig {
  int batch_size = 8, seq_len = 256, steps = 1000, grad_accum = 1;
  double lr = 3e-4, min_lr = 3e-5;
  int warmup_steps = 100;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0;
  uint64_t seed = 1337;
  int threads = 2, checkpoint_every = 0;
  // How many of the run's checkpoints stay on disk: after each save the oldest beyond this many are removed (the
  // one just saved is always kept); 0 keeps every one.
  int keep_checkpoints = 0;
  ComputeDtype compute_dtype = ComputeDtype::F32;
  // bf16 compute on the cpu backend: frozen weights are kept packed for the GEMMs, packed once instead of in every
  // call (about 4 more bytes per frozen linear parameter); false packs them in every call and holds nothing more.
  bool pack_frozen_bf16 = true;
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Pause;
  // The registered backend (backend/registry.h) the model computes on. One other than "cpu" trains only once its
  // self-test has passed on this machine (backend/validation.h) or with allow_unvalidated_backend.
  std::string backend = "cpu";
  bool allow_unvalidated_backend = false;
  // The linear layers' GEMMs on the cuda backend (BackendOptions::gemm): "own" (our kernels), "cublas" (cuBLAS,
  // opened at run time; the run fails to start without it) or "auto" (cuBLAS where it opens, else ours). Other
  // backends have only their own, which "own" and "auto" name.
  std::string gemm = "own";
  // Held-out loss every eval_every steps (and at the last), over eval_batches batches of the evaluation data
  // (moe_engine_set_eval_data); 0: never.
  int eval_every = 0, eval_batches = 4;
  RoutingSkew routing_skew;
  // Auxiliary-loss-free load balancing (train/load_balance.h): after each step every expert's selection bias
  // moves by this much towards its layer's mean load. 0: off; needs model.selection_bias.
  double balance_bias_rate = 0.0;
};

// Expert offload and pinning (docs/offload.md). mode "none" keeps every expert resident on the device.
enum class OffloadMode { None, Host, Ssd };
enum class PinPolicy { Previous, Ema, None };
// When an expert's AdamW update starts: after its own backward (ES-MoE), after its layer's backward, or one
// step late (ZeRO-Offload's delayed parameter update: not exact, an ablation baseline).
enum class ExpertOptimizer { Expert, Layer, Delayed };
enum class CachePolicy { Lru, Lfu, NextUse };
// Where uploads run: a copy worker beside the compute threads (overlapping them), or inline on the compute
// thread; or nowhere (mapped): on a backend whose device memory is host memory, an expert computes on its host
// copy in place (the cache entry, held while it computes) and only gradients move. On the CPU backend a copy
// worker only hides anything when it has a core of its own; auto chooses mapped for the SSD tier where the backend
// allows it and the cache has room for the experts held (lookahead + 3 entries), inline for the host tier when
// the compute threads take every core, and the worker otherwise.
enum class CopyStream { Auto, Worker, Inline, Mapped };

struct OffloadConfig {
  OffloadMode mode = OffloadMode::None;
  int64_t device_budget_bytes = 0;  // 0: unlimited (JSON null)
  int expert_slots = 0;             // 0: as many as the device budget holds (JSON null)
  int lookahead = 1;                // 0: no pipelining, each expert uploads when it is needed; > 1: experts also
                                    // compute in runs of up to this many (ExpertOffload::max_held)
  double pin_fraction = 0.25;
  PinPolicy pin_policy = PinPolicy::Previous;
  ExpertOptimizer optimizer = ExpertOptimizer::Expert;
  bool optimizer_overlap = true;  // false: expert updates run after the dense update and are waited for
  CopyStream copy_stream = CopyStream::Auto;
  // SSD tier: expert state in files under ssd_dir, reached through a host cache of cache_experts entries.
  int64_t host_budget_bytes = 0;  // 0: unlimited (JSON null)
  CachePolicy cache_policy = CachePolicy::Lru;
  int cache_experts = 0;  // 0: as many as the host budget holds (JSON null)
  int lfu_threshold = 2;
  double lfu_decay = 0.5;
  int lfu_decay_every = 64;  // cache requests between decays
  bool prefetch = true;
  std::string ssd_dir;  // empty: a fresh directory under the system's temporary directory
};

struct EngineConfig {
  ModelConfig model;
  TrainConfig train;
  OffloadConfig offload;
  PlacementConfig placement;  // D devices and the placement policy; one device: every decision is trivial
  DeviceGroupConfig device_group;  // the devices' budgets and threads
  PipelineConfig pipeline;         // micro-batches and memory reuse of the MoE layers' expert phase
  FinetuneConfig finetune;         // the "finetune" section; absent: every parameter trains
  // Experts run through devices/ (placement, pipelining) rather than directly in the MoE layer.
  bool runs_on_devices() const { return placement.devices > 1 || pipeline.engaged(); }
};

// Parses {"model": {...}, "train": {...}} (train optional). Throws EngineError naming the field.
EngineConfig parse_config(const json::Value& root);
EngineConfig parse_config_text(const std::string& text, const std::string& source);
ModelConfig parse_model_config(const json::Value& model);
TrainConfig parse_train_config(const json::Value& train);
OffloadConfig parse_offload_config(const json::Value& offload);
// devices (may be null) receives the placement section's device fields.
PlacementConfig parse_placement_config(const json::Value& placement, DeviceGroupConfig* devices = nullptr);
PipelineConfig parse_pipeline_config(const json::Value& pipeline);
RoutingSkew parse_routing_skew(const json::Value& skew);
json::Value model_config_to_json(const ModelConfig& m);
json::Value train_config_to_json(const TrainConfig& t);
json::Value offload_config_to_json(const OffloadConfig& o);
json::Value config_to_json(const EngineConfig& c);

const char* compute_dtype_name(ComputeDtype d);
const char* nonfinite_policy_name(NonFinitePolicy p);
const char* offload_mode_name(OffloadMode m);
const char* pin_policy_name(PinPolicy p);
const char* expert_optimizer_name(ExpertOptimizer o);
const char* cache_policy_name(CachePolicy p);
const char* skew_distribution_name(SkewDistribution d);

}  // namespace moe
