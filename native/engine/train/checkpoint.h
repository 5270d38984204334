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
#include "optim/optimizer.h"

namespace moe {

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
// (moments as m.<name> / v.<name>), state adds trainer_state.json; either may be null.
void save_checkpoint(const std::string& dir, const EngineConfig& cfg, Model& model, AdamWOptimizer* opt,
                     const TrainerState* state);

// Guards the directory replacement of save_checkpoint and export_hf: fails unless dir is absent, empty, or
// holds a config.json (a checkpoint), so a mistyped path never deletes an unrelated directory.
void check_checkpoint_target(const std::string& dir);

// True when dir/config.json names a Hugging Face "model_type"; false for ours or when there is no config.json.
bool is_hf_checkpoint(const std::string& dir);
// The model section of our config.json, or the converted Hugging Face config.
ModelConfig read_checkpoint_model_config(const std::string& dir);

// Loads every parameter from our or a Hugging Face checkpoint (F32, BF16, F16 or F64 tensors). Every model
// tensor must be present with its exact shape and nothing else may be stored; all of it is read and checked
// into host memory before the model's parameters are overwritten, so a failed load leaves them unchanged.
void load_weights(const std::string& dir, Model& model);

// False (changing nothing) when dir has no optimizer.safetensors. Otherwise loads the AdamW moments of
// `model`'s layout into opt and trainer_state.json into state, or fails without changing either.
bool load_optimizer_state(const std::string& dir, Model& model, AdamWOptimizer& opt, TrainerState& state);
// False when dir has no trainer_state.json.
bool read_trainer_state(const std::string& dir, TrainerState& state);

// Where a stored tensor's values go: `name` with `shape` fills our tensor from float `offset` on. A model
// tensor is the row-wise concatenation of its parts (e.g. HF q/k/v projections into attn.qkv.weight).
struct StoredPart {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;
};
struct TensorSource {
  const ParamTensor* param = nullptr;
  std::vector<StoredPart> parts;
};

}  // namespace moe
