// The engine config written back as JSON (a run's config.json, checkpoints): each section's fields, the optional
// ones only when they differ from their defaults, so older runs' files stay as they were; config.cpp parses them.
#include "model/config.h"

namespace moe {

json::Value model_config_to_json(const ModelConfig& m) {
  using json::Value;
  Value o = Value::make_object();
  o.set("arch", Value::of(m.family));
  o.set("vocab_size", Value::of(m.vocab_size));
  o.set("d_model", Value::of(m.d_model));
  o.set("n_layers", Value::of(m.n_layers));
  o.set("n_heads", Value::of(m.n_heads));
  o.set("n_kv_heads", Value::of(m.n_kv_heads));
  o.set("max_seq_len", Value::of(m.max_seq_len));
  o.set("d_ff", Value::of(m.d_ff));
  o.set("expert_d_ff", Value::of(m.expert_d_ff));
  Value experts = Value::make_array();
  for (int e : m.n_experts) experts.push(Value::of(e));
  o.set("n_experts", experts);
  o.set("top_k", Value::of(m.top_k));
  o.set("moe_every", Value::of(m.moe_every));
  o.set("renormalize", Value::of(m.renormalize));
  // The fields below are written only when they differ from their defaults, so configs without them stay as
  // they always were.
  if (!m.dense_layers.empty()) {
    Value dense = Value::make_array();
    for (int l : m.dense_layers) dense.push(Value::of(l));
    o.set("dense_layers", dense);
  }
  if (m.head_dim > 0) o.set("head_dim", Value::of(m.head_dim));
  if (m.routed_scaling != 1.0) o.set("routed_scaling_factor", Value::of(m.routed_scaling));
  if (m.selection_bias) o.set("selection_bias", Value::of(true));
  if (m.qk_norm != QkNorm::None) o.set("qk_norm", Value::of(qk_norm_name(m.qk_norm)));
  if (m.clip_qkv > 0) o.set("clip_qkv", Value::of(m.clip_qkv));
  if (m.sliding_window > 0) {
    o.set("sliding_window", Value::of(m.sliding_window));
    Value sliding = Value::make_array();
    for (int l : m.sliding_layers) sliding.push(Value::of(l));
    o.set("sliding_layers", sliding);
  }
  if (m.swiglu_alpha != 1.702) o.set("swiglu_alpha", Value::of(m.swiglu_alpha));
  if (m.swiglu_limit != 7.0) o.set("swiglu_limit", Value::of(m.swiglu_limit));
  o.set("shared_expert_d_ff", Value::of(m.shared_expert_d_ff));
  o.set("shared_expert_gate", Value::of(m.shared_expert_gate));
  o.set("residual_mlp", Value::of(m.residual_mlp));
  o.set("aux_loss_coef", Value::of(m.aux_loss_coef));
  o.set("z_loss_coef", Value::of(m.z_loss_coef));
  o.set("capacity_factor", m.capacity_factor > 0 ? Value::of(m.capacity_factor) : Value::null());
  o.set("rope_theta", Value::of(m.rope_theta));
  o.set("norm_eps", Value::of(m.norm_eps));
  o.set("tie_embeddings", Value::of(m.tie_embeddings));
  o.set("qkv_bias", Value::of(m.qkv_bias));
  if (m.out_bias) o.set("out_bias", Value::of(true));
  o.set("init_std", Value::of(m.init_std));
  if (m.latent.enabled()) o.set("latent_attention", latent_attention_to_json(m.latent));
  if (m.rope_scaling.type != RopeScalingType::None) o.set("rope_scaling", rope_scaling_to_json(m.rope_scaling));
  if (m.router.scoring != RouterScoring::Softmax || m.router.selection != TopkSelection::Plain)
    o.set("router", router_config_to_json(m.router));
  return o;
}

json::Value train_config_to_json(const TrainConfig& t) {
  using json::Value;
  Value o = Value::make_object();
  o.set("batch_size", Value::of(t.batch_size));
  o.set("seq_len", Value::of(t.seq_len));
  o.set("steps", Value::of(t.steps));
  o.set("grad_accum", Value::of(t.grad_accum));
  o.set("lr", Value::of(t.lr));
  o.set("min_lr", Value::of(t.min_lr));
  o.set("warmup_steps", Value::of(t.warmup_steps));
  o.set("weight_decay", Value::of(t.weight_decay));
  o.set("beta1", Value::of(t.beta1));
  o.set("beta2", Value::of(t.beta2));
  o.set("eps", Value::of(t.eps));
  o.set("grad_clip", Value::of(t.grad_clip));
  o.set("seed", Value::of(static_cast<double>(t.seed)));
  o.set("threads", Value::of(t.threads));
  o.set("checkpoint_every", Value::of(t.checkpoint_every));
  // Written only when set, so runs keep exactly the config.json they always had.
  if (t.keep_checkpoints > 0) o.set("keep_checkpoints", Value::of(t.keep_checkpoints));
  // Written only when it is not the default, so fp32 runs keep exactly the config.json they always had.
  if (t.compute_dtype != ComputeDtype::F32) o.set("compute_dtype", Value::of(compute_dtype_name(t.compute_dtype)));
  if (!t.pack_frozen_bf16) o.set("pack_frozen_bf16", Value::of(false));
  if (t.on_nonfinite != NonFinitePolicy::Pause) o.set("on_nonfinite", Value::of(nonfinite_policy_name(t.on_nonfinite)));
  if (t.balance_bias_rate > 0) o.set("balance_bias_rate", Value::of(t.balance_bias_rate));
  // Written only when not the defaults, so CPU runs keep exactly the config.json they always had.
  if (t.backend != "cpu") o.set("backend", Value::of(t.backend));
  if (t.allow_unvalidated_backend) o.set("allow_unvalidated_backend", Value::of(true));
  if (t.gemm != "own") o.set("gemm", Value::of(t.gemm));
  // Written only when on, so configs without evaluation stay as they were.
  if (t.eval_every > 0) {
    o.set("eval_every", Value::of(t.eval_every));
    o.set("eval_batches", Value::of(t.eval_batches));
  }
  return o;
}

json::Value offload_config_to_json(const OffloadConfig& c) {
  using json::Value;
  Value o = Value::make_object();
  o.set("mode", Value::of(offload_mode_name(c.mode)));
  o.set("device_budget_bytes", c.device_budget_bytes ? Value::of(static_cast<double>(c.device_budget_bytes)) : Value::null());
  o.set("expert_slots", c.expert_slots ? Value::of(c.expert_slots) : Value::null());
  o.set("lookahead", Value::of(c.lookahead));
  o.set("pin_fraction", Value::of(c.pin_fraction));
  o.set("pin_policy", Value::of(pin_policy_name(c.pin_policy)));
  o.set("optimizer", Value::of(expert_optimizer_name(c.optimizer)));
  o.set("optimizer_overlap", Value::of(c.optimizer_overlap));
  o.set("copy_stream", Value::of(c.copy_stream == CopyStream::Auto     ? "auto"
                                 : c.copy_stream == CopyStream::Worker ? "worker"
                                 : c.copy_stream == CopyStream::Inline ? "inline"
                                                                       : "mapped"));
  if (c.mode == OffloadMode::Ssd) {
    o.set("host_budget_bytes", c.host_budget_bytes ? Value::of(static_cast<double>(c.host_budget_bytes)) : Value::null());
    o.set("cache_policy", Value::of(cache_policy_name(c.cache_policy)));
    o.set("cache_experts", c.cache_experts ? Value::of(c.cache_experts) : Value::null());
    o.set("lfu_threshold", Value::of(c.lfu_threshold));
    o.set("lfu_decay", Value::of(c.lfu_decay));
    o.set("lfu_decay_every", Value::of(c.lfu_decay_every));
    o.set("prefetch", Value::of(c.prefetch));
    o.set("ssd_dir", c.ssd_dir.empty() ? Value::null() : Value::of(c.ssd_dir));
  }
  return o;
}

json::Value config_to_json(const EngineConfig& c) {
  json::Value o = json::Value::make_object();
  o.set("model", model_config_to_json(c.model));
  o.set("train", train_config_to_json(c.train));
  // Written only when present, so full-training runs keep exactly the config.json they always had.
  if (c.finetune.enabled) o.set("finetune", finetune_config_to_json(c.finetune));
  // Written only when offload is on, so resident runs keep exactly the config.json they always had.
  if (c.offload.mode != OffloadMode::None) o.set("offload", offload_config_to_json(c.offload));
  // Written only when on: a skewed run says so in its config.json.
  if (c.train.routing_skew.distribution != SkewDistribution::None) {
    json::Value k = json::Value::make_object();
    k.set("distribution", json::Value::of(skew_distribution_name(c.train.routing_skew.distribution)));
    k.set("zipf_s", json::Value::of(c.train.routing_skew.zipf_s));
    k.set("hot_fraction", json::Value::of(c.train.routing_skew.hot_fraction));
    k.set("seed", json::Value::of(static_cast<double>(c.train.routing_skew.seed)));
    o.set("routing_skew", k);
  }
  // Written only when it decides something, so single-device runs keep the config.json they always had.
  if (c.placement.devices > 1) {
    json::Value p = json::Value::make_object();
    p.set("devices", json::Value::of(c.placement.devices));
    p.set("policy", json::Value::of(placement_policy_name(c.placement.policy)));
    p.set("lambda", json::Value::of(c.placement.lambda));
    p.set("alpha", json::Value::of(c.placement.alpha));
    p.set("min_tokens", json::Value::of(c.placement.min_tokens));
    p.set("greedy_split", json::Value::of(c.placement.greedy_split));
    p.set("device_budget_bytes", c.device_group.budget_bytes > 0
                                     ? json::Value::of(static_cast<double>(c.device_group.budget_bytes))
                                     : json::Value::null());
    p.set("threads_per_device",
          c.device_group.threads > 0 ? json::Value::of(c.device_group.threads) : json::Value::null());
    o.set("placement", p);
  }
  if (c.pipeline.engaged()) {
    json::Value p = json::Value::make_object();
    p.set("partitions", c.pipeline.partitions == 0 ? json::Value::of("auto") : json::Value::of(c.pipeline.partitions));
    json::Value candidates = json::Value::make_array();
    for (int n : c.pipeline.candidates) candidates.push(json::Value::of(n));
    p.set("candidates", candidates);
    p.set("memory_reuse", json::Value::of(c.pipeline.reuse_auto                               ? "auto"
                                        : c.pipeline.memory_reuse == ReuseStrategy::None ? "off"
                                                                                         : reuse_strategy_name(c.pipeline.memory_reuse)));
    o.set("pipeline", p);
  }
  return o;
}

}  // namespace moe
