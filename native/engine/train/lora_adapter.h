// LoRA adapters out of and into the model: merging them into their base weights (what a merged Hugging Face
// export holds), and the PEFT adapter directory (adapter_config.json + adapter_model.safetensors).
#pragma once
#include "model/params.h"

namespace moe {

// arena (host, the layout's): every adapted base weight's rows += scale·B·A, summed in double.
void merge_lora_adapters(const ParamLayout& layout, float* arena);

}  // namespace moe
