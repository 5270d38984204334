// The Hugging Face model types we read and write, as data: one row per model type with its config.json
// keys (and the transformers defaults for keys a saved config may omit), its tensor names, and the
// features our model must have to be expressed in it. hf_interchange.cpp is one reader and one writer
// over these rows; a new model type is a new row.
#pragma once
#include <string>
#include <vector>

#include "model/features.h"  // QkNorm

namespace moe {

enum class HfType { Mixtral, Qwen2Moe, Olmoe, Qwen3Moe, DeepseekV2, DeepseekV3, GptOss };

// How the routed experts' weights are stored: one set of tensors per expert (experts.<e>.gate_proj, ...), or
// fused 3-D tensors with a leading expert dimension (experts.gate_up_proj, experts.down_proj), which newer
// transformers writes. Import reads either; export writes the one asked for.
enum class HfExpertLayout { PerExpert, Fused };
// The fused tensors' arrangement. GateUpRows (Mixtral, Qwen2-MoE): gate_up_proj [E, 2F, C] is gate rows then up
// rows of F.linear weights, down_proj [E, C, F]. GptOss: x @ W layout, gate_up_proj [E, C, 2F] with gate and up
// interleaved along the last dimension (gate = [..., ::2], up = [..., 1::2]), down_proj [E, F, C], and biases
// gate_up_proj_bias [E, 2F] (interleaved alike) and down_proj_bias [E, C]; gate_up_proj and down_proj may be
// stored as MXFP4.
enum class HfFusedExperts { GateUpRows, GptOss };

// What a model-type-specific config.json key carries.
enum class HfField {
  DenseAndExpertFf,  // model.d_ff and model.expert_d_ff (one width for both)
  DenseFf,           // model.d_ff (dense layers)
  ExpertFf,          // model.expert_d_ff
  SharedExpertFf,    // model.shared_expert_d_ff, required to be positive
  Experts,           // model.n_experts (the same in every MoE layer)
  Renormalize,       // model.renormalize; without this key the type always renormalises
  MoeEvery,          // model.moe_every; without this key every layer is an MoE layer
  Layers,            // model.n_layers, written only
  DenseLayers,       // model.dense_layers (Qwen's mlp_only_layers); absent or null: none
  HeadDim,           // model.head_dim; absent or null: json when given, else hidden_size / num_attention_heads
  ClipQkv,           // model.clip_qkv; null: off
  SlidingWindow,     // model.sliding_window, with "layer_types" naming the sliding layers (model.sliding_layers)
  SwigluLimit,       // model.swiglu_limit (json: the default)
  SwigluAlpha,       // model.swiglu_alpha (json: the default)
  QkvBias,           // model.qkv_bias (json: the default), Qwen2-MoE's qkv_bias
  AttentionBias,     // model.qkv_bias and model.out_bias together (json: the default), Qwen3-MoE's attention_bias
  Fixed,             // a constant, written only (import checks such keys in reject_unsupported)
  Only,              // a constant, written; on import a present non-null key with another value is refused by name
};

struct HfKey {
  const char* key;
  HfField field;
  const char* json = nullptr;  // Fixed: the value written; Renormalize, MoeEvery: the default when absent
};

// Tensor names. The attention, norms, embeddings and dense MLP are LLaMA-style in every type here; the
// MoE block's names differ. Layer tensors are under "model.layers.<l>.".
struct HfTensorNames {
  const char* embed = "model.embed_tokens.weight";
  const char* final_norm = "model.norm.weight";
  const char* lm_head = "lm_head.weight";
  const char* input_norm = "input_layernorm.weight";
  const char* post_norm = "post_attention_layernorm.weight";
  const char* attn = "self_attn.";  // + q_proj, k_proj, v_proj (rows of our qkv), o_proj
  const char* mlp = "mlp.";         // dense layers: + gate_proj, up_proj (rows of our gate_up), down_proj
  const char* moe = "mlp.";         // + "gate.weight" (the router), "experts.<e>." + the expert names
  const char* expert_gate = "gate_proj", *expert_up = "up_proj", *expert_down = "down_proj";
  const char* shared = nullptr;       // the shared expert (gate_proj, up_proj, down_proj), when the type has one
  const char* shared_gate = nullptr;  // its sigmoid gate's weight
  // The router's per-expert selection bias (our layers.L.moe.router.selection_bias), after `moe`, e.g.
  // "gate.e_score_correction_bias"; null: the type stores none, so a model with model.selection_bias cannot be
  // exported as it.
  const char* selection_bias = nullptr;
  const char* router = "gate";        // the router under the MoE block: + ".weight" (+ ".bias" when it has one)
  const char* fused_moe = nullptr;    // the MoE block's prefix in the fused layout when it differs from `moe`
};

struct HfFamily {
  HfType type;
  const char* model_type;    // config.json "model_type"
  const char* architecture;  // config.json "architectures"
  const char* label;         // for people: "Qwen2-MoE"
  const char* family;        // our model.arch that has the same math
  // Defaults of the transformers config class for keys a saved config.json may omit.
  int kv_heads;  // 0: num_attention_heads
  int max_positions;
  double rms_norm_eps, rope_theta, router_aux_loss_coef;
  bool qkv_bias;       // the q/k/v projections have biases
  bool shared_expert;  // every MoE layer has a shared expert with a sigmoid gate
  std::vector<HfKey> keys;  // model-type-specific config.json keys, in the order written
  HfTensorNames names;
  // Stored tensors (name suffixes) the type defines but the engine cannot run yet, and why.
  std::vector<const char*> unsupported_tensors;
  const char* unsupported_why = nullptr;
  // The attention's q/k RMSNorm (self_attn.q_norm / k_norm): none, over the whole projection, or per head.
  QkNorm qk_norm = QkNorm::None;
  // Multi-head latent attention, dense-first layers, ungated shared experts and the DeepSeek routers: the
  // config keys and attention tensors are mapped by train/hf_latent.cpp.
  bool latent = false;
  HfExpertLayout default_layout = HfExpertLayout::PerExpert;  // what export writes unless asked otherwise
  bool per_expert_layout = true;  // false: the type only has fused expert tensors
  HfFusedExperts fused = HfFusedExperts::GateUpRows;
  // A missing rope_scaling / rope_parameters means YaRN in this type's config class (gpt-oss), not plain RoPE.
  bool default_rope_is_yarn = false;
  // The config.json key counting multi-token-prediction layers stored after the last decoder layer (DeepSeek-V3's
  // num_nextn_predict_layers); null: the type has none. transformers does not load them; train/hf_storage.h.
  const char* mtp_layers_key = nullptr;
};

const std::vector<HfFamily>& hf_families();
const HfFamily& hf_family(HfType type);
// "\"mixtral\", \"qwen2_moe\", \"olmoe\" or \"qwen3_moe\"", for messages.
std::string hf_model_type_list();

}  // namespace moe
