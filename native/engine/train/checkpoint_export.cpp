#include "train/checkpoint_export.h"

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "model/trainable.h"
#include "train/arena_view.h"
#include "train/checkpoint.h"
#include "train/checkpoint_checksums.h"
#include "train/checkpoint_read.h"
#include "train/hf_interchange.h"
#include "train/lora_adapter.h"

namespace moe {
namespace {

// The checkpoint's tensors by their layout names, each read (converted, its file pages handed back) when asked.
class FileValues final : public TensorValues {
 public:
  explicit FileValues(const st::TensorSet& ts) : ts_(ts) {}
  void read(const ParamTensor& t, float* dst) override { ts_.read_f32(t.name, dst, t.shape); }

 private:
  const st::TensorSet& ts_;
};

}  // namespace

void export_checkpoint(const std::string& src, const std::string& out, const std::string& model_type, st::DType dtype,
                       const HfExpertLayout* expert_layout, bool adapter, const std::string& base_model) {
  if (is_hf_checkpoint(src))
    fail(src + ": is a Hugging Face directory, not one of our checkpoints; load it into a model to export it again");
  const std::string path = fs::join(src, "config.json");
  if (!fs::exists(path)) fail(src + ": no config.json; pass a checkpoint directory written by the engine");
  verify_checksum(src, "config.json");
  EngineConfig cfg;
  try {
    cfg = parse_config(json::parse(fs::read_file(path, 64ull << 20), path));
  } catch (const EngineError& e) {
    fail(path + ": " + e.what());
  }
  const ParamLayout layout(cfg.model, cfg.finetune);
  verify_checksum(src, "model.safetensors");  // before a byte of it is parsed
  const st::TensorSet ts(src);
  // Every tensor of the layout present once with its shape and a float dtype, nothing else: from the headers.
  std::vector<TensorSource> sources;
  for (const ParamTensor& t : layout.tensors()) sources.push_back({&t, {{t.name, t.shape, 0}}});
  check_stored(ts, {{&sources, nullptr}}, nullptr, nullptr);
  FileValues values(ts);
  if (adapter) {
    check(dtype == st::DType::F32, "export: a PEFT adapter is written in f32 (the adapters' own precision)");
    const TrainableSet trainable(layout, cfg.finetune);
    export_peft_adapter(out, cfg.model, layout, trainable, cfg.finetune, values, model_type, base_model);
  } else {
    export_hf(out, cfg.model, layout, values, model_type, dtype, expert_layout);
  }
}

}  // namespace moe
