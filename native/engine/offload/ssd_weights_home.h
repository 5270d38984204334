// Routed experts' weights in an SSD-tier file of their own, for a model with no trainer behind it (a chat with a
// model folder, an export of one): a load writes each expert into the file as soon as it is read, and readers
// (generation slots, an export) take them back an expert at a time, so the experts are never all in memory.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/params.h"
#include "offload/expert_store.h"
#include "offload/memory_tier.h"

namespace moe {

class SsdExpertStore;

class SsdWeightsHome final : public ExpertStateHome {
 public:
  // dir: where the file goes (empty: a fresh directory under the system's temporary directory); it is removed
  // with this. cache_experts: the host cache's entries (at least 4). seed: the initial values of an expert no load
  // writes (a PEFT adapter's folder leaves the base to them), which a read computes instead of the file's zeros.
  // in_bf16 (may be empty): the layout's tensors that are only ever computed on in bf16 (a model answering in bf16
  // compute): the records keep them as bf16, so every read and the cache move half their bytes, and a read gives
  // back their values rounded to bf16 (which is all such a reader computes with: the same bits).
  SsdWeightsHome(Backend& be, const ParamLayout& layout, uint64_t seed, const std::string& dir, int cache_experts,
                 const std::vector<bool>& in_bf16 = {});
  ~SsdWeightsHome() override;

  // kWeights only: there is no gradient or optimizer state here.
  void read_expert(int k, ExpertPart part, float* dst) override;
  void write_expert(int k, ExpertPart part, const float* src) override;
  // The tensors' words straight from the record's, where the record keeps each of them in bf16.
  bool read_expert_bf16(int k, float* dst, const std::vector<Bf16Words>& tensors) override;

 private:
  // One tensor's place in an expert's range and in its record (floats from the start of each).
  struct Part {
    size_t at, floats, record_at;
    bool bf16;
  };
  const ParamLayout& layout_;
  std::vector<std::vector<Part>> parts_;  // [expert]: in_bf16 given; else empty (the record is the range)
  uint64_t seed_;
  std::vector<bool> written_;
  MemoryTier host_, ssd_;
  std::unique_ptr<SsdExpertStore> store_;
  // Expert k's record, each part into dst (fp32, widened where the record keeps bf16) or, where `words` names one
  // for the part (a bf16 one), its count of words as they are.
  void read_record(int k, float* dst, const std::vector<const Bf16Words*>& words);
};

}  // namespace moe
