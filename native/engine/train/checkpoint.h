// Checkpoint directories: ours (config.json, model.safetensors, optimizer.safetensors, trainer_state.json),
// written atomically as a whole directory, and weight loading from ours or a Hugging Face directory
// (train/hf_interchange.h) with full validation before anything of the model changes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model.h"
#include "model/params.h"
#include "offload/expert_store.h"
#include "optim/optimizer.h"

namespace moe {

namespace st {
class TensorSet;
}
struct HfStorage;
enum class HfType;

// trainer_state.json: {"format": "moe-engine-checkpoint", "version": 1, "step", "data_cursor", "tokens_seen",
// "seed", "data_path"}. Integers are JSON numbers, so they must stay below 2^53 to be stored exactly.
struct TrainerState {
  int64_t step = 0;
  uint64_t data_cursor = 0;
  int64_t tokens_seen = 0;
  uint64_t seed = 0;
  std::string data_path;
};

// Writes `dir` as a unit (temp sibling, fsync, rename): an existing checkpoint of that name is replaced only
// once the new one is complete. cfg.model must equal the model's config. opt adds optimizer.safetensors
// (moments as m.<name> / v.<name>), state adds trainer_state.json; either may be null. The files stream a tensor
// at a time from where each lives (experts: from `experts` when set, one expert's part at a time), so a save
// never holds a copy of the model.
void save_checkpoint(const std::string& dir, const EngineConfig& cfg, Model& model, AdamWOptimizer* opt,
                     const TrainerState* state, ExpertStateHome* experts = nullptr);

// About the bytes save_checkpoint writes for this model: every parameter in fp32 and, with the optimizer, the two
// moments of each trained one, plus headers and the small files (a bound: never less than a save writes).
uint64_t checkpoint_bytes(const Model& model, bool with_optimizer);

// Why a run holding up to `count` checkpoints of `checkpoint` bytes at once cannot start in run_dir, whose disk has
// `free` bytes (-1: unknown, never refused) and where the SSD tier's file may still take ssd_to_come bytes (-1: the
// file is on another disk or there is none); empty when they fit. Every run saves at least its last step's.
std::string checkpoint_space_error(const std::string& run_dir, uint64_t checkpoint, int64_t count, int64_t ssd_to_come,
                                   int64_t free);

// Guards the directory replacement of save_checkpoint: fails unless dir is absent, empty, or holds one of our
// checkpoints (a config.json that is not a Hugging Face model's), so a mistyped path never deletes an unrelated
// directory or a downloaded model.
void check_checkpoint_target(const std::string& dir);
// Guards an export (Hugging Face folder, PEFT adapter): dir must be absent or empty, so an export never replaces
// its own source or any folder the user made.
void check_export_target(const std::string& dir);

// True when dir/config.json names a Hugging Face "model_type"; false for ours or when there is no config.json.
bool is_hf_checkpoint(const std::string& dir);
// The model section of our config.json, or the converted Hugging Face config.
ModelConfig read_checkpoint_model_config(const std::string& dir);

// Loads every parameter from our or a Hugging Face checkpoint (F32, BF16, F16 or F64 tensors). Every model
// tensor must be present with its exact shape and nothing else may be stored; all of it is checked from the
// headers before anything is read, so a refused load leaves the model unchanged. Reads go into the arena in place
// on a host backend (through a host copy beside a device), so only an I/O error can stop a load midway, leaving
// what it read so far. experts: the routed experts' home apart from the arenas, which receives each expert's
// weights as soon as they are read (the arenas' expert ranges stay untouched). For a model that lays its weights
// out as they load (Model::lays_out_while_loading), on a host backend each tensor it lays out and each expert goes
// to Model::weights_loaded once read, not into the arena.
// init_rest (may be null): for a model whose arena nothing wrote yet (a new Model's zeros), the seed that
// initialises every tensor the folder does not hold (a LoRA model's adapters) before the read, as Model::init
// would, so a large model is never drawn from the seed only to be overwritten; routed experts in an apart home get
// theirs from the home's own seed.
void load_weights(const std::string& dir, Model& model, ExpertStateHome* experts = nullptr,
                  const uint64_t* init_rest = nullptr);

// What load_weights would refuse in a Hugging Face checkpoint's stored tensors for model config m, from the
// headers alone (nothing is read or decoded): every missing, unexpected, mistyped or misshapen tensor, each
// naming its file and tensor. Empty: the tensors match. storage: train/hf_storage.h, from its config.json.
std::vector<std::string> check_hf_tensors(const st::TensorSet& ts, const ModelConfig& m, HfType type,
                                          const HfStorage& storage);

// False (changing nothing) when dir has no optimizer.safetensors. Otherwise loads the AdamW moments of
// `model`'s layout into opt and trainer_state.json into state, or fails without changing either.
// experts: as load_weights', for the experts' moments.
bool load_optimizer_state(const std::string& dir, Model& model, AdamWOptimizer& opt, TrainerState& state,
                          ExpertStateHome* experts = nullptr);
// False when dir has no trainer_state.json.
bool read_trainer_state(const std::string& dir, TrainerState& state);

// Where a stored tensor's values go: `name` with `shape` fills our tensor from float `offset` on. A model
// tensor is the row-wise concatenation of its parts (e.g. HF q/k/v projections into attn.qkv.weight).
// A fused expert tensor (HF's experts.gate_up_proj [E, ...]) instead spreads over `experts`, one model tensor
// per leading index (train/stored_part.h maps its elements); it may be stored as MXFP4 when `mxfp4`.
struct StoredPart {
  StoredPart() = default;
  StoredPart(std::string n, std::vector<int64_t> s, size_t off = 0) : name(std::move(n)), shape(std::move(s)), offset(off) {}
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;
  std::vector<const ParamTensor*> experts;  // empty: the part is contiguous in its TensorSource's tensor
  // Element (e, a, b) of a fused [E, A, B] tensor (or (e, b) of [E, B]) is float
  // offset + a·stride_a + (b / group)·stride_b + (b % group)·stride_group of experts[e].
  int64_t stride_a = 0, stride_b = 1, group = 1, stride_group = 0;
  bool mxfp4 = false;  // may be stored as <name>_blocks and <name>_scales (train/mxfp4.h), decoded on import
};
struct TensorSource {
  const ParamTensor* param = nullptr;
  std::vector<StoredPart> parts;
};

}  // namespace moe
