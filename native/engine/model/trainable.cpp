#include "model/trainable.h"

#include "core/error.h"

namespace moe {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

ParamGroup param_group(const std::string& name) {
  if (name.size() > 7 && (name.compare(name.size() - 7, 7, ".lora_A") == 0 || name.compare(name.size() - 7, 7, ".lora_B") == 0))
    return ParamGroup::Lora;
  if (name == "wte" || name == "wpe") return ParamGroup::Embeddings;
  if (name == "lm_head.weight") return ParamGroup::LmHead;
  if (starts_with(name, "norm_f.")) return ParamGroup::Norms;
  if (starts_with(name, "layers.")) {
    const size_t dot = name.find('.', 7);
    const std::string rest = dot == std::string::npos ? "" : name.substr(dot + 1);
    if (starts_with(rest, "norm1.") || starts_with(rest, "norm2.")) return ParamGroup::Norms;
    if (starts_with(rest, "attn.")) return ParamGroup::Attention;
    if (starts_with(rest, "mlp.") || starts_with(rest, "moe.residual.")) return ParamGroup::DenseMlp;
    if (rest == "moe.router.selection_bias") return ParamGroup::None;
    if (starts_with(rest, "moe.router.")) return ParamGroup::Router;
    if (starts_with(rest, "moe.experts.")) return ParamGroup::Experts;
    if (starts_with(rest, "moe.shared.") || starts_with(rest, "moe.shared_gate.")) return ParamGroup::SharedExperts;
  }
  fail("tensor '" + name + "' belongs to no parameter group (model/trainable.cpp assigns each layout tensor one)");
}

TrainableSet::TrainableSet(const ParamLayout& layout, const FinetuneConfig& finetune) {
  const std::vector<ParamTensor>& tensors = layout.tensors();
  const std::vector<ExpertRange>& ranges = layout.expert_ranges();
  everything_ = !finetune.enabled;
  grad_offsets_.assign(tensors.size(), kFrozen);
  size_t r = 0;  // the expert range at or after the current tensor (tensors and ranges are both in arena order)
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& t = tensors[i];
    while (r < ranges.size() && ranges[r].end <= t.offset) ++r;
    const bool in_expert = r < ranges.size() && t.offset >= ranges[r].begin;
    bool train = everything_;
    if (!everything_) {
      const ParamGroup g = param_group(t.name);
      // An expert's adapter exists only where the expert is selected; its base weights train only when selected.
      train = g == ParamGroup::Lora || (g != ParamGroup::None && finetune.trains(g) &&
                                        (!in_expert || finetune.expert_selected(ranges[r].layer, ranges[r].expert)));
    }
    if (!train) {
      frozen_numel_ += t.numel;
      continue;
    }
    // The same 16-float alignment as the layout: with everything trained the offsets are the layout's own.
    grad_offsets_[i] = grad_total_;
    grad_total_ += (t.numel + 15) / 16 * 16;
    trained_numel_ += t.numel;
  }
  for (const ExpertRange& x : ranges) {
    ExpertRange g{x.layer, x.expert, kFrozen, 0};
    for (size_t i = 0; i < tensors.size(); ++i) {
      const ParamTensor& t = tensors[i];
      if (t.offset < x.begin || t.offset >= x.end || !trains(i)) continue;
      if (g.begin == kFrozen) g.begin = grad_offsets_[i];
      g.end = grad_offsets_[i] + (t.numel + 15) / 16 * 16;
    }
    if (g.begin == kFrozen) {
      // Nothing trained: an empty range where the expert would sit, so stretches between ranges stay ordered.
      size_t at = 0;
      for (size_t i = 0; i < tensors.size() && tensors[i].offset < x.begin; ++i)
        if (trains(i)) at = grad_offsets_[i] + (tensors[i].numel + 15) / 16 * 16;
      g.begin = g.end = at;
    }
    grad_experts_.push_back(g);
  }
}

}  // namespace moe
