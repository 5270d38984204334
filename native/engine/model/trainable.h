// Which tensors train: derived once from the finetune section. Every layout tensor maps to one parameter group
// (param_group, by its place in the layout); a tensor trains when its group does and, for a routed expert's
// tensor, when the section selects that expert. Gradients and AdamW moments exist only for trained tensors, packed
// in layout order (TrainableSet::grad_offset); a frozen tensor has no gradient buffer and is never written.
#pragma once
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"

namespace moe {

// The group of layout tensor `name`; ParamGroup::None for the selection bias (it never has a gradient).
ParamGroup param_group(const std::string& name);

class TrainableSet {
 public:
  static constexpr size_t kFrozen = std::numeric_limits<size_t>::max();

  // Without a finetune section every tensor trains and the packed arena is the layout itself.
  TrainableSet(const ParamLayout& layout, const FinetuneConfig& finetune);

  bool trains(size_t tensor) const { return grad_offsets_[tensor] != kFrozen; }
  // Offset of the tensor's gradient (and moments) in the packed arena; kFrozen when it does not train.
  size_t grad_offset(size_t tensor) const { return grad_offsets_[tensor]; }
  const std::vector<size_t>& grad_offsets() const { return grad_offsets_; }
  size_t grad_total() const { return grad_total_; }  // floats in the packed arena
  // Every tensor trains, at its own layout offset (full training as without the section).
  bool everything() const { return everything_; }
  // The routed experts' ranges in packed coordinates (one per layout ExpertRange, in order; begin == end for an
  // expert with nothing trained).
  const std::vector<ExpertRange>& grad_expert_ranges() const { return grad_experts_; }
  size_t trained_numel() const { return trained_numel_; }  // unpadded elements of trained tensors
  size_t frozen_numel() const { return frozen_numel_; }

 private:
  std::vector<size_t> grad_offsets_;
  std::vector<ExpertRange> grad_experts_;
  size_t grad_total_ = 0, trained_numel_ = 0, frozen_numel_ = 0;
  bool everything_ = true;
};

}  // namespace moe
