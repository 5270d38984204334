// Hugging Face interchange: config.json and tensors of the model types in train/hf_families.h, both ways, read and
// written through that table (the DeepSeek rows' latent attention and routers through train/hf_latent.h). Import
// is load_weights (train/checkpoint.h) on an HF directory; export_hf writes one. Anything that would change the
// math and has no counterpart here (sliding window, another rope scaling, another activation, ...) is an error
// naming the field or tensor.
#pragma once
#include <string>
#include <vector>

#include "core/json.h"
#include "model/config.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/hf_families.h"
#include "train/safetensors.h"

namespace moe {

// A row of hf_families() by its model_type; anything else fails listing them.
HfType parse_hf_model_type(const std::string& model_type);
const char* hf_model_type_name(HfType t);

// An HF config.json object to our model config (validated like ours); `source` names the file in errors.
ModelConfig hf_to_model_config(const json::Value& hf, const std::string& source);
// Our model config as an HF config.json; fails naming the model field the layout cannot express.
json::Value model_to_hf_config(const ModelConfig& m, HfType type, st::DType dtype);

// For every tensor of `layout` (built from m), the HF tensors it is made of, in HF checkpoint order.
// expert_layout: how the routed experts are stored (read: stored_expert_layout of the checkpoint).
std::vector<TensorSource> hf_tensor_sources(const ModelConfig& m, const ParamLayout& layout, HfType type,
                                            HfExpertLayout expert_layout = HfExpertLayout::PerExpert);
// Fails on stored tensors that the HF model type defines but the engine cannot run (OLMoE QK-norm).
void check_hf_tensors_supported(const st::TensorSet& tensors, HfType type);

// Writes dir/config.json and dir/model.safetensors (F32 or BF16) as a unit, replacing an existing dir only
// once complete. OLMoE note: transformers' OlmoeAttention always applies q_norm/k_norm, which this engine
// does not have, so an "olmoe" export round-trips here but is not numerically equivalent in transformers.
// expert_layout: per-expert or fused expert tensors; null: the type's default (hf_families.h). MXFP4-stored
// experts are written decoded, in `dtype`, and config.json carries no quantization_config. The file streams a
// tensor at a time (LoRA adapters merged into it) from where each lives: experts, the routed experts' home when
// apart from the arenas, read an expert at a time; so an export never holds a copy of the model.
void export_hf(const std::string& dir, Model& model, const std::string& model_type, st::DType dtype,
               const HfExpertLayout* expert_layout = nullptr, ExpertStateHome* experts = nullptr);
// The same for a model of config m and layout `params` whose tensors come from `values` (no model is built: a
// checkpoint's file, train/checkpoint_export.h).
class TensorValues;
void export_hf(const std::string& dir, const ModelConfig& m, const ParamLayout& params, TensorValues& values,
               const std::string& model_type, st::DType dtype, const HfExpertLayout* expert_layout = nullptr);

}  // namespace moe
