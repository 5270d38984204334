// How a Hugging Face checkpoint stores more than the model's float tensors, read from its config.json: block-wise
// FP8 weights (quantization_config "fp8", train/fp8.h, dequantised on import), gpt-oss's MXFP4 experts
// (train/mxfp4.h), and multi-token-prediction layers (DeepSeek-V3's num_nextn_predict_layers, stored as
// model.layers.<num_hidden_layers + i>), which transformers' DeepseekV3 does not load and neither does the import:
// they are skipped, and the notes say so.
#pragma once
#include <string>
#include <vector>

#include "core/json.h"
#include "train/fp8.h"
#include "train/hf_families.h"
#include "train/safetensors.h"

namespace moe {

struct HfStorage {
  Fp8Blocks fp8;       // rows 0: no FP8 weights declared
  bool mxfp4 = false;  // quantization_config "mxfp4" (gpt-oss experts)
  int mtp_first = 0, mtp_layers = 0;  // model.layers.<mtp_first + i>, i < mtp_layers: not loaded
  // Whether the import leaves this stored tensor out (a multi-token-prediction layer's).
  bool skipped(const std::string& tensor) const;
};

// Fails naming quantization_config when it is a method (or an FP8 variant) the import cannot decode exactly.
HfStorage hf_storage(const json::Value& hf, const std::string& source, const HfFamily& row);
// What the import does beyond reading float tensors, in words (FP8 tensors dequantised, MXFP4 decoded, MTP
// layers skipped with their tensor count).
std::vector<std::string> hf_storage_notes(const HfStorage& s, const st::TensorSet& ts);

}  // namespace moe
