// The run config's "finetune" section: which parameter groups train, which routed experts a method touches, and
// the LoRA and ESFT settings. Absent (enabled false): full training exactly as without the section. Parsed and
// written here only; what trains is derived from it once (model/trainable.h). See docs/finetune.md.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/json.h"

namespace moe {

struct ModelConfig;

enum class FinetuneMethod { Full, Lora, Esft };

// The parameter groups a fine-tune trains or freezes (every layout tensor belongs to one, or to none: the
// selection bias, which never has a gradient).
// Lora: the adapters, which always train.
enum class ParamGroup { Embeddings, Attention, Norms, Router, Experts, SharedExperts, DenseMlp, LmHead, Lora, None };
constexpr int kParamGroups = 8;  // the groups a config names (before Lora)

// The linears LoRA adapters attach to.
enum class LoraTarget { Attention, Experts, SharedExperts, DenseMlp };
constexpr int kLoraTargets = 4;

enum class EsftScore { Gate, Tokens };

struct LoraConfig {
  int rank = 16;
  double alpha = 32.0, dropout = 0.0;
  bool rslora = false;
  std::vector<LoraTarget> targets;  // distinct, in the order given
  // The adapter's output scale: alpha / rank, or alpha / sqrt(rank) with rsLoRA.
  double scaling() const;
  bool targets_has(LoraTarget t) const;
};

struct EsftConfig {
  double threshold = 0.9;
  EsftScore score = EsftScore::Gate;
  int sample_batches = 32;
  FinetuneMethod with = FinetuneMethod::Full;  // Full or Lora
};

struct FinetuneConfig {
  bool enabled = false;  // the section is present
  FinetuneMethod method = FinetuneMethod::Full;
  std::vector<ParamGroup> train;  // distinct, in the order given (or the method's default)
  // Per MoE layer (model layer index), the routed experts the method touches; a layer not listed: all of them.
  std::map<int, std::vector<int>> experts;
  bool has_lora = false;  // the lora section applies (lora_used(); then it is required)
  LoraConfig lora;
  bool has_esft = false;  // method esft (its section's fields default when left out)
  EsftConfig esft;

  bool trains(ParamGroup g) const;
  // Whether the method touches routed expert e of model layer `layer` (listed, or its layer not listed).
  bool expert_selected(int layer, int e) const;
  bool lora_used() const;  // method lora, or esft with lora
  bool uses_lora() const { return enabled && lora_used(); }
};

// Parses the section (null or absent: enabled false); errors name the field ("finetune.lora.rank").
FinetuneConfig parse_finetune_config(const json::Value& v);
// Checks what needs the model: expert layers are MoE layers, expert ids exist.
void validate_finetune_config(const FinetuneConfig& f, const ModelConfig& m);
json::Value finetune_config_to_json(const FinetuneConfig& f);

const char* finetune_method_name(FinetuneMethod m);
const char* param_group_name(ParamGroup g);
const char* lora_target_name(LoraTarget t);
const char* esft_score_name(EsftScore s);

}  // namespace moe
