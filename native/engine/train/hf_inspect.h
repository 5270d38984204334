// What a Hugging Face model folder is and whether the engine can load it, from config.json and the safetensors
// headers alone (no weight is read): the model type and the converted model config (or the refusal naming the
// field), the weight files and whether every shard of the index is there, the dtypes stored, every expected
// tensor checked for presence, dtype and shape by the same mapping and checks the import uses, and the notes of
// what the import does beyond reading float tensors (FP8 dequantised, MTP layers skipped, MXFP4 decoded).
#pragma once
#include <string>

#include "core/json.h"

namespace moe {

// Fails only when dir is not a model folder at all (no config.json, or one without a string model_type); every
// other finding is in the result's "problems" (each naming its file and tensor or field) and "supported" is
// false when there is any.
json::Value inspect_hf_dir(const std::string& dir);

}  // namespace moe
