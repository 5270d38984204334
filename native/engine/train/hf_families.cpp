#include "train/hf_families.h"

namespace moe {

const std::vector<HfFamily>& hf_families() {
  using F = HfField;
  static const std::vector<HfFamily> families = {
      {.type = HfType::Mixtral,
       .model_type = "mixtral",
       .architecture = "MixtralForCausalLM",
       .label = "Mixtral",
       .family = "mixtral",
       .kv_heads = 8,
       .max_positions = 4096 * 32,
       .rms_norm_eps = 1e-5,
       .rope_theta = 1e6,
       .router_aux_loss_coef = 0.001,
       .qkv_bias = false,
       .shared_expert = false,
       .keys = {{"intermediate_size", F::DenseAndExpertFf},
                {"num_local_experts", F::Experts},
                {"sliding_window", F::Fixed, "null"},
                {"router_jitter_noise", F::Fixed, "0"}},
       .names = {.moe = "block_sparse_moe.", .expert_gate = "w1", .expert_up = "w3", .expert_down = "w2",
                 .fused_moe = "mlp."},
       .unsupported_tensors = {},
       .unsupported_why = nullptr},
      {.type = HfType::Qwen2Moe,
       .model_type = "qwen2_moe",
       .architecture = "Qwen2MoeForCausalLM",
       .label = "Qwen2-MoE",
       .family = "mixtral",
       .kv_heads = 16,
       .max_positions = 32768,
       .rms_norm_eps = 1e-6,
       .rope_theta = 10000.0,
       .router_aux_loss_coef = 0.001,
       .qkv_bias = true,
       .shared_expert = true,
       .keys = {{"intermediate_size", F::DenseFf},
                {"moe_intermediate_size", F::ExpertFf},
                {"shared_expert_intermediate_size", F::SharedExpertFf},
                {"num_experts", F::Experts},
                {"norm_topk_prob", F::Renormalize, "false"},
                {"decoder_sparse_step", F::MoeEvery, "1"},
                {"mlp_only_layers", F::DenseLayers},
                {"use_sliding_window", F::Fixed, "false"},
                {"sliding_window", F::Fixed, "null"},
                {"max_window_layers", F::Layers}},
       .names = {.shared = "mlp.shared_expert.", .shared_gate = "mlp.shared_expert_gate.weight"},
       .unsupported_tensors = {},
       .unsupported_why = nullptr},
      {.type = HfType::Olmoe,
       .model_type = "olmoe",
       .architecture = "OlmoeForCausalLM",
       .label = "OLMoE",
       .family = "mixtral",
       .kv_heads = 0,
       .max_positions = 4096,
       .rms_norm_eps = 1e-5,
       .rope_theta = 10000.0,
       .router_aux_loss_coef = 0.01,
       .qkv_bias = false,
       .shared_expert = false,
       .keys = {{"intermediate_size", F::DenseAndExpertFf},
                {"num_experts", F::Experts},
                {"norm_topk_prob", F::Renormalize, "false"},
                {"attention_bias", F::Fixed, "false"},
                {"clip_qkv", F::ClipQkv}},
       .names = {},
       .unsupported_tensors = {},
       .unsupported_why = nullptr,
       // OlmoeAttention: q_norm over hidden_size and k_norm over head_dim·num_key_value_heads, before the
       // head split (modeling_olmoe.py).
       .qk_norm = QkNorm::Projection},
      {.type = HfType::Qwen3Moe,
       .model_type = "qwen3_moe",
       .architecture = "Qwen3MoeForCausalLM",
       .label = "Qwen3-MoE",
       .family = "mixtral",
       .kv_heads = 4,
       .max_positions = 32768,
       .rms_norm_eps = 1e-6,
       .rope_theta = 10000.0,
       .router_aux_loss_coef = 0.001,
       .qkv_bias = false,
       .shared_expert = false,
       .keys = {{"intermediate_size", F::DenseFf},
                {"moe_intermediate_size", F::ExpertFf},
                {"num_experts", F::Experts},
                {"norm_topk_prob", F::Renormalize, "false"},
                {"decoder_sparse_step", F::MoeEvery, "1"},
                {"mlp_only_layers", F::DenseLayers},
                {"head_dim", F::HeadDim},
                {"attention_bias", F::Only, "false"},
                {"use_sliding_window", F::Only, "false"},
                {"sliding_window", F::Fixed, "null"}},
       .names = {},
       .unsupported_tensors = {},
       .unsupported_why = nullptr,
       // Qwen3MoeAttention: q_norm and k_norm over head_dim on each head, before rope (modeling_qwen3_moe.py).
       .qk_norm = QkNorm::Head},
      {.type = HfType::GptOss,
       .model_type = "gpt_oss",
       .architecture = "GptOssForCausalLM",
       .label = "gpt-oss",
       .family = "gpt-oss",
       .kv_heads = 8,
       .max_positions = 131072,
       .rms_norm_eps = 1e-5,
       .rope_theta = 150000.0,
       .router_aux_loss_coef = 0.001,
       .qkv_bias = true,
       .shared_expert = false,
       .keys = {{"intermediate_size", F::DenseAndExpertFf},
                {"num_local_experts", F::Experts},
                {"head_dim", F::HeadDim, "64"},
                {"sliding_window", F::SlidingWindow},
                {"swiglu_limit", F::SwigluLimit, "7.0"},
                {"swiglu_alpha", F::SwigluAlpha, "1.702"},
                {"attention_bias", F::Fixed, "true"}},
       .names = {.router = "router"},
       .unsupported_tensors = {},
       .unsupported_why = nullptr,
       .default_layout = HfExpertLayout::Fused,
       .per_expert_layout = false,
       .fused = HfFusedExperts::GptOss,
       .default_rope_is_yarn = true},
  };
  return families;
}

const HfFamily& hf_family(HfType type) {
  for (const HfFamily& f : hf_families())
    if (f.type == type) return f;
  return hf_families().front();
}

std::string hf_model_type_list() {
  const auto& all = hf_families();
  std::string out;
  for (size_t i = 0; i < all.size(); ++i)
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string("\"") + all[i].model_type + "\"";
  return out;
}

}  // namespace moe
