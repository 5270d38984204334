// Shared by the fine-tuning tests: small models of every family shape and their run config with an optional
// "finetune" section.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace finetune_test {

// Small models of every family shape the trainable sets must handle: learned positions and biases (gpt-moe),
// RoPE and SwiGLU (mixtral), sinks, sliding windows and clamped SwiGLU (gpt-oss), latent attention with a dense
// first layer, shared experts and a selection bias (DeepSeek), a gated shared expert and q/k norms (Qwen, OLMoE),
// per-head q/k norms and a dense first layer (Qwen3); gpt-moe also carries the PR-MoE residual MLP.
inline const std::vector<std::pair<std::string, std::string>>& families() {
  static const std::vector<std::pair<std::string, std::string>> all = {
      {"gpt-moe", R"("arch": "gpt-moe", "n_layers": 2, "n_experts": [4, 4], "n_kv_heads": 2, "residual_mlp": true)"},
      {"mixtral", R"("arch": "mixtral", "n_layers": 2, "n_experts": [4, 4], "n_kv_heads": 1)"},
      {"gpt-oss", R"("arch": "gpt-oss", "n_layers": 2, "n_experts": [4, 4], "n_kv_heads": 1, "head_dim": 8,
                     "sliding_window": 4, "sliding_layers": [0])"},
      {"deepseek", R"("arch": "mixtral", "n_layers": 2, "dense_layers": [0], "n_experts": [4], "n_kv_heads": 2,
                      "shared_expert_d_ff": 16, "selection_bias": true,
                      "latent_attention": {"q_lora_rank": 12, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
                                           "qk_rope_head_dim": 4, "v_head_dim": 6},
                      "router": {"scoring": "sigmoid", "selection": "noaux_tc", "n_group": 2, "topk_group": 1})"},
      {"qwen-olmoe", R"("arch": "mixtral", "n_layers": 2, "n_experts": [4, 4], "n_kv_heads": 2,
                        "shared_expert_d_ff": 16, "shared_expert_gate": true, "qk_norm": "projection",
                        "clip_qkv": 4.0)"},
      {"qwen3", R"("arch": "mixtral", "n_layers": 2, "dense_layers": [0], "n_experts": [4], "n_kv_heads": 1,
                   "head_dim": 8, "qk_norm": "head")"},
  };
  return all;
}

inline std::string config(const std::string& model, const std::string& finetune = "") {
  std::string c = R"({"model": {)" + model + R"(, "vocab_size": 64, "d_model": 32, "n_heads": 2,
      "max_seq_len": 16, "d_ff": 48, "expert_d_ff": 24, "top_k": 2, "z_loss_coef": 0.001},
    "train": {"batch_size": 2, "seq_len": 16, "steps": 100, "lr": 1e-2, "warmup_steps": 2, "threads": 1,
              "seed": 11, "grad_accum": 1, "grad_clip": 0})";
  if (!finetune.empty()) c += R"(, "finetune": )" + finetune;
  return c + "}";
}

}  // namespace finetune_test
