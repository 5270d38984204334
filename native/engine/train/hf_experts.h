// The routed experts' tensors of one MoE layer in a Hugging Face layout: per expert (experts.<e>.gate_proj,
// up_proj, down_proj: row blocks of our gate_up and whole down) or fused 3-D tensors (hf_families.h,
// HfFusedExperts), which spread over every expert's tensors through StoredPart's element map.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "train/checkpoint.h"
#include "train/hf_families.h"
#include "train/safetensors.h"

namespace moe {

// Appends the sources of layer l's routed experts; `moe` is the MoE block's HF prefix ("model.layers.<l>.mlp.").
void hf_expert_sources(std::vector<TensorSource>& out, const ModelConfig& m, const ParamLayout& layout,
                       const HfFamily& hf, int l, const std::string& moe, HfExpertLayout expert_layout);

// The layout a stored checkpoint uses: fused when any tensor is a fused expert tensor (or its MXFP4 blocks).
HfExpertLayout stored_expert_layout(const st::TensorSet& tensors);
// "per-expert" | "fused".
const char* hf_expert_layout_name(HfExpertLayout layout);
// Fails naming the layout when the type does not have it (gpt_oss has only fused experts).
void check_expert_layout(const HfFamily& hf, HfExpertLayout layout);

}  // namespace moe
