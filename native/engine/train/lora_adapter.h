// LoRA adapters out of and into the model: merging them into their base weights (what a merged Hugging Face
// export holds), and the PEFT adapter directory: adapter_config.json (peft_type LORA) and adapter_model.safetensors
// with PEFT's keys for the Hugging Face layout (base_model.model.<module>.lora_A.weight; trained base modules
// under base_model.model.<module>.weight, listed in modules_to_save). Module names come from the same table as the
// full export (hf_tensor_sources), so an adapter names exactly the modules a merged export would hold.
#pragma once
#include <string>

#include "model/config.h"
#include "model/params.h"

namespace moe {

class Model;
class ExpertStateHome;
class TensorValues;
class TrainableSet;

// W (the adapter's base tensor, host): its rows row0.. += scale·B·A, summed in double; A [rank, cols], B [rows, rank].
void merge_lora_adapter(const LoraAdapter& a, double scale, int64_t rank, const float* A, const float* B, float* W);
// arena (host, the layout's): every adapted base weight merged so.
void merge_lora_adapters(const ParamLayout& layout, float* arena);

// Writes dir as a PEFT adapter of the model's LoRA run for Hugging Face model type `model_type`. Refused by name:
// a model without adapters, a layout whose adapted or trained module is not a separate Linear in that type (fused
// experts: export merged instead), a module both adapted and trained.
// experts: the routed experts' home when apart from the arenas (their adapters are read from it).
// base_model: the base model folder adapter_config.json names (base_model_name_or_path; empty: null), where PEFT
// and a chat with the adapter folder find the base.
void export_peft_adapter(const std::string& dir, Model& model, const FinetuneConfig& finetune,
                         const std::string& model_type, ExpertStateHome* experts = nullptr,
                         const std::string& base_model = "");
// The same for a model of config m, layout and trainable set whose tensors come from `values` (no model is built).
void export_peft_adapter(const std::string& dir, const ModelConfig& m, const ParamLayout& layout,
                         const TrainableSet& trainable, const FinetuneConfig& finetune, TensorValues& values,
                         const std::string& model_type, const std::string& base_model = "");

// Reads a PEFT adapter directory written for this model (rank and scaling must match; its modules among the
// section's, saved modules whole) into the model's adapters and the trained base modules it saved; the base weights
// come from elsewhere (load_weights first). An adapted module the file leaves out (PEFT adapters on q_proj and
// v_proj only, or on some layers) keeps the values it has: a fresh model's B = 0, the base alone.
// experts: as load_weights' (each expert's other tensors are read from it first and kept).
void load_peft_adapter(const std::string& dir, Model& model, const FinetuneConfig& finetune,
                       ExpertStateHome* experts = nullptr);

// Whether dir holds adapter_config.json.
bool is_peft_adapter(const std::string& dir);

// The base model folder a PEFT adapter's adapter_config.json names (base_model_name_or_path); refused by name when
// it names none or no model folder on this machine (a hub id).
std::string peft_base_folder(const std::string& dir);
// The finetune section under which model m holds the adapter's tensors: LoRA of its rank and scaling on the
// targets (attention, experts, shared experts, dense MLPs) it adapts any Linear of (the others start at B = 0),
// training the base groups it saves whole. Refused by name when no section fits (an adapter on a module the
// engine does not adapt, such as the router, or on another model).
FinetuneConfig finetune_of_peft_adapter(const std::string& dir, const ModelConfig& m);

}  // namespace moe
