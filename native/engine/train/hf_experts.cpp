#include "train/hf_experts.h"

#include "core/error.h"

namespace moe {
namespace {

const ParamTensor* param(const ParamLayout& layout, const std::string& name) {
  const ParamTensor* p = layout.find(name);
  if (!p) fail("Hugging Face mapping: the model has no tensor '" + name + "'; the layout does not match its config");
  return p;
}

}  // namespace

const char* hf_expert_layout_name(HfExpertLayout layout) {
  return layout == HfExpertLayout::Fused ? "fused" : "per-expert";
}

void check_expert_layout(const HfFamily& hf, HfExpertLayout layout) {
  if (layout == HfExpertLayout::PerExpert && !hf.per_expert_layout)
    fail(std::string("Hugging Face ") + hf.model_type + ": expert layout \"per-expert\" does not exist for " +
         hf.label + "; its checkpoints store fused expert tensors (use \"fused\")");
}

HfExpertLayout stored_expert_layout(const st::TensorSet& tensors) {
  for (const auto& [name, entry] : tensors.entries())
    if (name.find(".experts.gate_up_proj") != std::string::npos || name.find(".experts.down_proj") != std::string::npos)
      return HfExpertLayout::Fused;
  return HfExpertLayout::PerExpert;
}

void hf_expert_sources(std::vector<TensorSource>& out, const ModelConfig& m, const ParamLayout& layout,
                       const HfFamily& hf, int l, const std::string& moe, HfExpertLayout expert_layout) {
  check_expert_layout(hf, expert_layout);
  const int E = m.experts_at(l);
  const int64_t C = m.d_model, F = m.expert_d_ff;
  const std::string ours = "layers." + std::to_string(l) + ".moe.experts.";
  auto expert = [&](int e, const char* tensor) { return param(layout, ours + std::to_string(e) + "." + tensor); };
  const HfTensorNames& n = hf.names;

  if (expert_layout == HfExpertLayout::PerExpert) {
    for (int e = 0; e < E; ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      const ParamTensor* gate_up = expert(e, "gate_up.weight");
      out.push_back({gate_up,
                     {{x + n.expert_gate + ".weight", {F, C}, 0}, {x + n.expert_up + ".weight", {F, C}, (size_t)(F * C)}}});
      out.push_back({expert(e, "down.weight"), {{x + n.expert_down + ".weight", {C, F}, 0}}});
    }
    return;
  }

  // Fused: one stored tensor per kind spans the E experts' tensors.
  auto fused = [&](const char* tensor, const std::string& name, std::vector<int64_t> shape, int64_t stride_a,
                   int64_t stride_b, int64_t group = 1, int64_t stride_group = 0, bool mxfp4 = false) {
    StoredPart part(name, std::move(shape));
    for (int e = 0; e < E; ++e) part.experts.push_back(expert(e, tensor));
    part.stride_a = stride_a;
    part.stride_b = stride_b;
    part.group = group;
    part.stride_group = stride_group;
    part.mxfp4 = mxfp4;
    out.push_back({part.experts.front(), {part}});
  };
  const std::string x = moe + "experts.";
  if (hf.fused == HfFusedExperts::GateUpRows) {
    // gate_up_proj[e] and down_proj[e] are F.linear weights: exactly our gate_up and down.
    fused("gate_up.weight", x + "gate_up_proj", {E, 2 * F, C}, C, 1);
    fused("down.weight", x + "down_proj", {E, C, F}, F, 1);
    return;
  }
  // GptOss: element (e, c, j) of gate_up_proj is row (j % 2)·F + j / 2, column c of our gate_up [2F, C].
  fused("gate_up.weight", x + "gate_up_proj", {E, C, 2 * F}, 1, C, 2, F * C, /*mxfp4=*/true);
  fused("gate_up.bias", x + "gate_up_proj_bias", {E, 2 * F}, 0, 1, 2, F);
  // down_proj[e] is [F, C] (x @ W): element (f, c) is our down [C, F] at c·F + f.
  fused("down.weight", x + "down_proj", {E, F, C}, 1, F, 1, 0, /*mxfp4=*/true);
  fused("down.bias", x + "down_proj_bias", {E, C}, 0, 1);
}

}  // namespace moe
