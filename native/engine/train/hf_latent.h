// The DeepSeek-V2/V3 part of the Hugging Face interchange (rows with `latent` in train/hf_families.cpp),
// after transformers' models/deepseek_v2 and models/deepseek_v3 (modeling_*.py, configuration_*.py):
// multi-head latent attention's config keys and tensors, YaRN rope_scaling, dense-first layers, ungated
// shared experts and the routers (V2: softmax, greedy or group_limited_greedy, weights times
// routed_scaling_factor and never normalised; V3: sigmoid, noaux_tc with e_score_correction_bias,
// norm_topk_prob, then times routed_scaling_factor). What those files would compute differently is refused.
#pragma once
#include <string>
#include <vector>

#include "core/json.h"
#include "model/config.h"
#include "model/params.h"
#include "train/checkpoint.h"
#include "train/hf_families.h"

namespace moe {

// Fills m's latent attention, rope scaling, router, dense layers, shared expert and experts per MoE layer from
// the config.json `hf` (`source` names it in errors); experts is n_routed_experts.
void latent_hf_to_model_config(const json::Value& hf, const std::string& source, HfType type, int experts,
                               ModelConfig& m);
// Checks that m is expressible as `type` and sets the DeepSeek keys of the config.json `o`.
void latent_model_to_hf_config(const ModelConfig& m, HfType type, json::Value& o);
// rope_scaling (or rope_parameters) of a config.json as our model.rope_scaling: none, or YaRN; other types fail.
RopeScalingConfig hf_rope_scaling(const json::Value& hf, const std::string& source);
// Our YaRN rope scaling as a config.json rope_scaling object: DeepSeek's form ("type" beside "rope_type", mscale and
// mscale_all_dim always) or the newer one (rope_type only, the mscales when set), as each model type writes it.
json::Value hf_rope_scaling_json(const RopeScalingConfig& r, bool deepseek_form);
// The attention tensors of layer l (ours under "layers.<l>.attn.", HF's under hf_attn).
void latent_attention_sources(const ParamLayout& layout, const ModelConfig& m, int l, const std::string& hf_attn,
                              std::vector<TensorSource>& out);

}  // namespace moe
