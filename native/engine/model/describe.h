// What the engine knows about a model before building it: its features, its parameters counted by group
// (as ParamLayout lays them out, with and without the arena's 16-float padding), and the bytes of each
// fp32 state (weights, gradients, AdamW's two moments) for the dense part and the routed experts. The
// planner in the workbench computes the same numbers; a parity test holds the two together.
#pragma once
#include "core/json.h"
#include "model/config.h"

namespace moe {

json::Value describe_params(const ModelConfig& m);
// A fine-tune's split (model/trainable.h): parameters that train (LoRA adapters among them) and that stay frozen,
// per group (finetune_config.h names), and the bytes: fp32 gradient and two moments of the trained ones (packed,
// as allocated), the frozen weights' fp32 bytes.
json::Value describe_finetune(const ModelConfig& m, const FinetuneConfig& f);

}  // namespace moe
