// Exporting one of our checkpoint directories without building a model: each tensor is read from the checkpoint's
// file as the export reaches it, so a checkpoint larger than memory exports in a few tensors' memory.
#pragma once
#include <string>

#include "train/hf_experts.h"
#include "train/safetensors.h"

namespace moe {

// src: our checkpoint (config.json with the run's model and finetune sections, model.safetensors), verified
// against its checksums and checked tensor by tensor from the headers before anything is written. Writes what
// export_hf (adapter false) or export_peft_adapter (adapter true) writes for the model loaded from src, byte for
// byte. A Hugging Face directory is refused by name (load it into a model to re-export it). base_model: as
// export_peft_adapter's.
void export_checkpoint(const std::string& src, const std::string& out, const std::string& model_type, st::DType dtype,
                       const HfExpertLayout* expert_layout, bool adapter, const std::string& base_model = "");

}  // namespace moe
