// Reading a checkpoint's stored tensors into host arenas: every stored part is checked from the headers first,
// then converted, the non-expert tensors in place and each routed expert through one expert's buffer, so a load
// whose experts live in a home apart (an SSD or host tier beside a device) never holds all of them at once.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/params.h"
#include "train/checkpoint.h"

namespace moe {

struct HfStorage;
namespace st {
class TensorSet;
}

// One host arena a load fills: the parameters, or a moment in the packed gradient layout.
struct ArenaTarget {
  const std::vector<TensorSource>* sources = nullptr;
  float* arena = nullptr;
  // Where each source's tensor starts in `arena`, in floats (the moments' packed offsets); null: its layout offset.
  const std::vector<size_t>* at = nullptr;
  // The routed experts' ranges in `arena` (sorted): the layout's expert_ranges(), or the packed
  // grad_expert_ranges(). Null: none is read an expert at a time (the sources hold no fused expert tensor).
  const std::vector<ExpertRange>* experts = nullptr;
  // Set: each expert's values go to the home instead of `arena` once all of its stored parts are read, and
  // `arena`'s expert ranges are never touched. `partial`: the sources leave some of an expert's tensors out
  // (adapters beside a base checkpoint, a PEFT adapter), so its current values are read from the home first.
  ExpertStateHome* home = nullptr;
  ExpertPart part = kWeights;
  bool partial = false;
  // Set: what the load reads for each tensor outside the routed experts, and each expert read into `arena`, goes to
  // take(begin, end, values) instead once all that is stored for it is read: values holds [begin, end) of `arena`
  // as the load would leave it (a tensor's padding zero; an expert's tensors the file leaves out as `arena` holds
  // them), and the read never writes `arena` there. An answering model lays its weights out from them, so the
  // pages of the fp32 weights it hands back are never touched.
  std::function<void(size_t, size_t, const float*)> take{};
  // With take: whether it wants [begin, end) (a tensor outside the routed experts, or an expert); else that is read
  // into `arena`.
  std::function<bool(size_t, size_t)> takes{};
};

// Checks the whole stored set against the expected parts (each present once, float dtype, FP8 with its scales
// or MXFP4 blocks and scales, exact shape, and nothing else stored but what `storage` skips) from the headers
// alone. Every problem found goes to `problems`; null: fails on the first.
void check_stored(const st::TensorSet& ts, const std::vector<ArenaTarget>& targets, const HfStorage* storage,
                  std::vector<std::string>* problems);
// check_stored, then converts every part into its arena (or its expert's home). Once the check passes, only an
// I/O error can fail the reads; with a home, the experts written before it keep their new values.
void read_checked(const st::TensorSet& ts, const std::vector<ArenaTarget>& targets, const HfStorage* storage);

// Host memory for a load to fill an arena through. On a host backend the arena itself: every stored tensor is
// checked from the headers before the first read, so only an I/O error can stop a load midway, and a resident
// model never needs a second copy of itself to load. Beside a device, a host copy that starts as the arena's
// values outside `skip` (the experts a home receives, whose pages here are never touched), and put() copies the
// same spans back.
class ArenaStaging {
 public:
  ArenaStaging(Backend& be, float* arena, size_t floats, const std::vector<ExpertRange>* skip = nullptr);
  ~ArenaStaging();
  ArenaStaging(const ArenaStaging&) = delete;
  ArenaStaging& operator=(const ArenaStaging&) = delete;
  float* data() { return host_ ? host_ : arena_; }
  bool in_place() const { return host_ == nullptr; }  // data() is the arena: what a load writes is there at once
  void put();

 private:
  Backend& be_;
  float* arena_;
  float* host_ = nullptr;                         // null: the arena is host memory, filled in place
  std::vector<std::pair<size_t, size_t>> spans_;  // [begin, end) in floats
};

}  // namespace moe
