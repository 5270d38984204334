// Model families as features. A family ("gpt-moe", "mixtral") is only a name for a row of default
// features; every kernel choice (which norm, which position encoding, which FFN activation, which
// tensors exist) reads the features derived here, never the family name. A new family is a new row
// in model_families(), and a new kind of attention, routing or activation is a new enum value with
// its kernel, not a new branch on a name: q/k norm is a QkNorm kind, latent attention another
// AttentionKind, sigmoid or grouped routing another RouterScoring / TopkSelection, a clamped SwiGLU
// another FfnActivation.
#pragma once
#include <string>
#include <vector>

#include "backend/types.h"  // RouterScoring, TopkSelection
#include "core/json.h"

namespace moe {

struct ModelConfig;

enum class NormKind { LayerNorm, RmsNorm };
enum class PositionKind { Learned, Rope };         // learned: a wpe table of max_seq_len rows; rope: rotary q/k
// multi-head: n_kv_heads == n_heads. latent: multi-head latent attention (model.latent_attention, model/mla_block.h)
enum class AttentionKind { MultiHead, GroupedQuery, Latent };
// swiglu: a gated in-projection of 2F rows; swiglu_clamped: gpt-oss's (up + 1)·g·σ(αg) with clamped gate and up
enum class FfnActivation { Gelu, Swiglu, SwigluClamped };
// RMSNorm on q and k before rope: none; over the whole projected width (q over NH·HS, k over NKV·HS, before the
// head split: OLMoE); or per head over HS with one weight shared by the heads (Qwen3).
enum class QkNorm { None, Projection, Head };

// What a family fixes, and the defaults of the config fields it only suggests.
struct FamilyFeatures {
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  AttentionKind attention = AttentionKind::MultiHead;
  QkNorm qk_norm = QkNorm::None;  // default of model.qk_norm
  FfnActivation activation = FfnActivation::Gelu;
  RouterScoring router_scoring = RouterScoring::Softmax;
  TopkSelection topk_selection = TopkSelection::Plain;
  bool linear_bias = true;      // biases on the norms, the attention output and the FFN projections
  bool qkv_bias = true;         // default of model.qkv_bias
  bool tie_embeddings = true;   // default of model.tie_embeddings
  // Biases without norm biases (linear_bias has all of them): on the attention out-projection, on the FFN
  // projections, on the router's logits; and a learned sink logit per head in the attention softmax (gpt-oss).
  bool out_bias = false, ffn_bias = false, router_bias = false, attention_sinks = false;
  bool has_out_bias() const { return linear_bias || out_bias; }
  bool has_ffn_bias() const { return linear_bias || ffn_bias; }
};

struct ModelFamily {
  const char* name;     // model.arch
  const char* summary;  // for errors and descriptions
  FamilyFeatures features;
};

// Every family the engine runs, in the order errors list them.
const std::vector<ModelFamily>& model_families();
// "gpt-moe", "mixtral": the names, quoted, for messages.
std::string model_family_names();
// The family named `name`; fails naming model.arch and listing the families.
const ModelFamily& find_model_family(const std::string& name);

// The features one model runs with: its family's, with the config's choices among them applied.
struct ModelFeatures : FamilyFeatures {
  double rope_theta = 0;  // with PositionKind::Rope; 0 otherwise
  bool shared_expert = false, shared_expert_gate = false, residual_mlp = false;
  int moe_every = 1;  // layer l is an MoE layer iff (l + 1) % moe_every == 0; the others are dense
  double clip_qkv = 0;  // > 0: q, k and v clamped to [-clip_qkv, clip_qkv] after the q/k norm
  bool gated_ffn() const { return activation == FfnActivation::Swiglu || activation == FfnActivation::SwigluClamped; }
};

ModelFeatures model_features(const ModelConfig& m);
// The family's rules on the config (e.g. multi-head attention needs n_kv_heads == n_heads); fails naming the field.
void check_model_features(const ModelConfig& m);
// The grouped top-k selections' rule on the experts per layer (n_group divides them); fails naming the field.
void check_router_groups(const ModelConfig& m);

json::Value features_to_json(const ModelFeatures& f);
const char* norm_kind_name(NormKind k);
const char* position_kind_name(PositionKind k);
const char* attention_kind_name(AttentionKind k);
const char* qk_norm_name(QkNorm k);
const char* ffn_activation_name(FfnActivation a);
const char* router_scoring_name(RouterScoring s);
const char* topk_selection_name(TopkSelection s);

}  // namespace moe
