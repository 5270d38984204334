// A model arena read a tensor at a time on the host, for what writes or returns it (checkpoints, exports, tensor
// reads): the parameters, or the gradient or a moment in the packed layout. In place on a host backend, copied a
// tensor at a time from a device; a routed expert's range, when its home is apart from the arenas, from the home
// one expert's part at a time. So none of them holds a copy of the model.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/params.h"
#include "train/checkpoint.h"

namespace moe {

class ArenaView {
 public:
  // experts: the routed experts' ranges in `arena` (sorted); home: where they live when apart (null: the arena
  // holds them); part: which of each expert's parts `arena` is. The backend must be synchronized.
  ArenaView(Backend& be, const float* arena, const std::vector<ExpertRange>& experts, ExpertStateHome* home,
            ExpertPart part)
      : be_(be), arena_(arena), experts_(experts), home_(home), part_(part) {}

  // numel floats from `offset` (within one tensor); valid until the next call.
  const float* tensor(size_t offset, size_t numel);
  // The same, copied into dst.
  void read(size_t offset, size_t numel, float* dst);

 private:
  Backend& be_;
  const float* arena_;
  const std::vector<ExpertRange>& experts_;
  ExpertStateHome* home_;
  ExpertPart part_;
  std::vector<float> expert_, copy_;
  int held_ = -1;  // the expert whose part expert_ holds
};

// Where an export reads each model tensor's values: the whole tensor, in layout order.
class TensorValues {
 public:
  virtual ~TensorValues() = default;
  virtual void read(const ParamTensor& t, float* dst) = 0;
};

// A model's parameters as an export reads them: through an ArenaView (experts: the routed experts' home when it is
// apart from the arenas).
class ParamValues final : public TensorValues {
 public:
  ParamValues(Model& model, ExpertStateHome* experts)
      : view_((model.backend().synchronize(), model.backend()), model.params(), model.layout().expert_ranges(),
              experts, kWeights) {}
  void read(const ParamTensor& t, float* dst) override { view_.read(t.offset, t.numel, dst); }

 private:
  ArenaView view_;
};

}  // namespace moe
