// The decoder-only MoE transformer (both families, one code path): parameters, gradients, saved
// activations, forward with loss, and hand-written backward through every layer.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "devices/device_experts.h"
#include "model/attention_block.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/features.h"
#include "model/mla_block.h"
#include "model/params.h"
#include "model/trainable.h"
#include "moe/moe_layer.h"
#include "offload/expert_access.h"

namespace moe {

struct ForwardResult {
  double loss = 0;       // mean cross-entropy over unmasked targets (0 when there are none)
  double aux_loss = 0;   // Σ over MoE layers of aux_loss_coef·aux + z_loss_coef·z
  int64_t targets = 0;   // unmasked targets
};

class Model {
 public:
  // dtype BF16 computes the linear layers (attention projections, FFNs and experts, the output head; not the router)
  // with sgemm_bf16 on bf16 copies of their weights; the fp32 parameters stay the masters.
  // finetune decides which tensors train (model/trainable.h); the default: every one.
  Model(const ModelConfig& cfg, Backend& be, ComputeDtype dtype = ComputeDtype::F32,
        const FinetuneConfig& finetune = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ModelFeatures& features() const { return features_; }
  ComputeDtype compute_dtype() const { return dtype_; }
  const ParamLayout& layout() const { return layout_; }
  Backend& backend() { return be_; }
  // Writable access (optimizer steps, checkpoint loads, tests) marks the bf16 weight copies stale; the next
  // forward() refreshes them, so a forward and its backward always use the same weights.
  float* params() {
    bf16_stale_ = true;
    return params_.f();
  }
  // Brings the bf16 weight copies up to the fp32 weights where they went stale (bf16 compute; nothing in fp32):
  // forward() does it, and so must anything else that computes with the model's params (generation).
  void prepare_weights() {
    if (dtype_ == ComputeDtype::BF16 ? bf16_stale_ || bf16_trained_stale_
                                     : inference_only_ && (bf16_stale_ || !weights_handed_back_))
      refresh_bf16_weights();
  }
  // The optimizer's writes: only trained tensors change, so only their bf16 copies go stale (a LoRA run's frozen
  // base is converted once, not every step).
  float* params_for_update() {
    bf16_trained_stale_ = true;
    return params_.f();
  }
  // For an optimizer that writes the bf16 copies with its update (Backend::adamw_update_bf16): tensor i's copy, or
  // null where it has none (fp32 compute; the tensors bf16 compute keeps in fp32, such as norms and the router).
  uint16_t* bf16_copy_for_update(size_t i) {
    return i < bf16_planned_.size() && bf16_planned_[i] ? params_bf16_.u16() + layout_.tensors()[i].offset : nullptr;
  }
  // The bytes of the arena's bf16 weight copies (0 in fp32 compute), with or without the routed experts'.
  size_t bf16_copy_bytes(bool experts) const;
  bool bf16_experts_apart() const { return experts_apart_; }
  // [tensor index]: whether bf16 compute reads the tensor only through a bf16 copy (every linear weight; the
  // embedding table, read in fp32 by the lookup, even where the head shares it, is not). Empty in fp32 compute.
  std::vector<bool> bf16_only_tensors() const;
  // A model that only answers (a generation session's own), set before its first forward: no tensor changes after
  // its load. The first refresh goes tensor by tensor: in bf16 compute each linear weight is laid out by the
  // backend for the forward's product straight from its fp32 values (Backend::lay_out_bf16_weight; else its copy
  // is written), and the fp32 weight, which bf16 compute reads only to make that, is handed back
  // (Backend::discard). What stays is about 2 bytes per linear weight instead of 4 + 2 (+ 2 laid out), plus what
  // bf16 compute keeps in fp32 (norms, router, embedding). In fp32 compute each linear weight is laid out for the
  // forward's product (Backend::lay_out_weight: a decode step then streams it in order) and handed back where the
  // backend keeps that layout: the same bytes. Changing the weights afterwards is an error.
  void set_inference_only();
  // [tensor index]: laid out for answering (its fp32 values handed back unless the embedding lookup reads them).
  const std::vector<bool>& laid_out_tensors() const { return answered_; }
  // Whether a load hands this model its values (weights_loaded) rather than writing its arena: an answering model
  // before its first forward (set_inference_only and set_expert_access come first).
  bool lays_out_while_loading() const { return inference_only_ && !weights_handed_back_; }
  // A load's final values of [begin, end) (floats of the parameter arena; a tensor outside the routed experts, or
  // an expert). Each linear weight there is laid out from them now, rather than at the first refresh, and the
  // rest is written to the arena, so the fp32 pages of the weights laid out are never touched and a load's peak is
  // about the laid-out size. Under a finetune section only frozen tensors are laid out: a PEFT adapter read after
  // the base may still write the trained ones. Writing a laid-out tensor afterwards is an error.
  void weights_loaded(size_t begin, size_t end, const float* values);
  // Whether weights_loaded would lay out some tensor in [begin, end) (else a load may write the arena there).
  bool lays_out_any(size_t begin, size_t end) const;
  // After an update that wrote the copy of every trained tensor that has one: forward has none of them to refresh.
  void bf16_copies_written() { bf16_trained_stale_ = false; }
  // The gradient arena: trained tensors only, packed in layout order (trainable().grad_offset(i)); with
  // everything trained it has the parameters' layout.
  float* grads() { return grads_.f(); }
  size_t num_params() const { return layout_.total(); }
  size_t num_grads() const { return trainable_.grad_total(); }
  const TrainableSet& trainable() const { return trainable_; }
  size_t grad_bytes() const { return grads_.bytes(); }  // the gradient arena's allocation

  // Tensor pointers into the parameter and gradient arenas (offload rebases expert pointers from these); a frozen
  // tensor's gradient pointer is null, and backward then computes only what flows to the input.
  const ModelParams& param_ptrs() const { return p_; }
  const ModelParams& grad_ptrs() const { return g_; }
  // Where MoE layers reach their experts; null restores the resident default. Not owned.
  void set_expert_access(ExpertAccess* access);

  // The seed's weights (init_params), a piece of the arena at a time, so no copy of the whole model is ever made.
  // experts false leaves the routed experts' ranges as they are: an expert offload whose home is apart from the
  // arenas initialises each with init_range as it stores it, so their pages are never all touched at once.
  // A new model's parameters are zeros (its arena is allocated zeroed, which costs nothing for large ones) until
  // an init or a load (load_weights' init_rest draws only what a folder lacks).
  void init(uint64_t seed, bool experts = true);
  void init_range(uint64_t seed, size_t begin, size_t end);
  void zero_grads();
  // Zeroes every gradient outside the routed experts' ranges (expert offload zeroes those itself, once the
  // previous step's expert updates no longer read them).
  void zero_dense_grads();

  // inputs/targets: [B, T] token ids (targets may be null: logits only; -1 masks a target).
  ForwardResult forward(const int32_t* inputs, const int32_t* targets, int B, int T);
  // A routing-skew experiment: later forwards route by seeded draws numbered `draw` (null: the router decides).
  void set_routing_skew(const RoutingSkew* skew, uint64_t draw) {
    routing_skew_ = skew;
    routing_draw_ = draw;
  }
  // LoRA dropout for the training step's forward and backward numbered `draw` (active), or none (evaluation,
  // generation, measurement).
  void set_lora_dropout(bool active, uint64_t seed = 0, uint64_t draw = 0) {
    lora_dropout_.active = active;
    lora_dropout_.seed = seed;
    lora_dropout_.draw = draw;
  }
  // Accumulates into grads() the gradient of (loss + aux_loss) of the last forward, times loss_scale.
  void backward(float loss_scale);

  const float* logits() const { return logits_.f(); }  // [B, T, V] of the last forward
  int moe_layer_count() const { return static_cast<int>(moe_layers_.size()); }
  const MoeLayer& moe_layer(int i) const { return *moe_layers_[i]; }
  const AttentionActs& attention_acts(int l) const { return acts_[l].attn; }  // layer l's, of the last forward

  // Routed experts compute on D devices with this placement and pipelining from now on.
  void run_experts_on_devices(const PlacementConfig& placement, const PipelineConfig& pipeline,
                              const DeviceGroupConfig& devices);
  bool on_devices() const { return device_group_ != nullptr; }
  // Per MoE layer, what its experts did on the devices since the last call; and each device's peak bytes.
  std::vector<LayerPlacement> take_device_records();
  std::vector<int64_t> device_peak_bytes() const;

  // Allocates every activation and scratch buffer a step of B × T tokens uses (forward does it too).
  void reserve_activations(int B, int T);
  // Bytes of those buffers: what offload charges to the device tier besides parameters and slots.
  size_t activation_bytes() const;

 private:
  struct LayerActs {
    DeviceBuffer ln1, ln1_mean, ln1_rstd, x_mid, ln2, ln2_mean, ln2_rstd, ffn_out, h, act;
    AttentionActs attn;
    MlaActs mla;  // latent attention's, instead of attn's
  };

  bool latent() const { return features_.attention == AttentionKind::Latent; }
  void bind_bf16_weights();
  void plan_bf16_copies();
  void attach_lora_dropout(float p);
  void refresh_bf16_weights();
  void norm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, int N);
  void norm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                     const float* mean, const float* rstd, int N);
  ExpertAccess& experts() { return expert_access_ ? *expert_access_ : *resident_experts_; }
  double layer_forward(int l, int B, int T);  // returns the layer's aux-loss contribution
  void layer_backward(int l, int B, int T, float loss_scale);

  ModelConfig cfg_;
  ModelFeatures features_;  // every kernel choice below reads these, never the family name
  AttentionBlock attention_;
  MlaBlock mla_;  // runs instead of attention_ when features_.attention is Latent
  Backend& be_;
  ComputeDtype dtype_;
  ParamLayout layout_;
  TrainableSet trainable_;
  DeviceBuffer params_, grads_;
  ModelParams p_, g_;
  // bf16 compute: copies in the fp32 arena's layout (only the linear weights are filled), and the merged
  // (offset, count) ranges they occupy.
  KeptBf16Buffer params_bf16_;
  std::vector<std::pair<size_t, size_t>> bf16_ranges_, bf16_trained_ranges_;  // (offset, floats), merged
  struct KeptLinear {
    size_t offset;
    int I, O;  // the weight is [O, I]
  };
  std::vector<KeptLinear> kept_linears_;  // the frozen weights in kept regions, prepared after each full refresh
  std::vector<bool> bf16_copied_;          // [tensor index]: the tensor has a bf16 copy
  std::vector<bool> bf16_planned_;         // [tensor index]: ... which the arena keeps current
  std::vector<bool> fp32_planned_;         // [tensor index]: an answering fp32 model lays it out
  bool experts_apart_ = false;             // an ExpertAccess holds the routed experts elsewhere
  bool inference_only_ = false;
  bool weights_handed_back_ = false;  // an answering model's first refresh ran: its fp32 linear weights are gone
  std::vector<bool> answered_;        // [tensor index]: laid out for answering (sized by set_inference_only)
  size_t answered_count_ = 0;
  void refresh_for_answering();
  void answer_with(size_t tensor, const float* src);
  bool lays_out_at_load(size_t tensor) const;
  std::pair<size_t, size_t> tensors_within(size_t begin, size_t end) const;
  void for_each_linear(const std::function<void(const float*, const uint16_t**)>& fn);
  std::vector<bool> linear_tensors();
  void plan_fp32_layouts();
  bool bf16_stale_ = true, bf16_trained_stale_ = false;
  std::vector<std::unique_ptr<MoeLayer>> moe_layers_;
  std::unique_ptr<DeviceGroup> device_group_;
  std::vector<std::unique_ptr<DeviceExperts>> device_experts_;  // [MoE layer]
  std::unique_ptr<ResidentExpertAccess> resident_experts_;
  ExpertAccess* expert_access_ = nullptr;  // indexed by MoE-layer index
  int B_ = 0, T_ = 0;

  DeviceBuffer tokens_, targets_;
  const RoutingSkew* routing_skew_ = nullptr;
  uint64_t routing_draw_ = 0;
  LoraDropout lora_dropout_;  // every adapter's LoraParams points here
  std::vector<int32_t> skew_picks_;  // host staging of the draws, reused across layers and steps
  DeviceBuffer forced_topk_;
  std::vector<DeviceBuffer> resid_;  // resid_[l]: residual stream entering layer l; resid_[L] the output
  std::vector<LayerActs> acts_;
  DeviceBuffer lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
  DeviceBuffer dresid_, dtmp_, dtmp2_, dlogits_;
  AttentionScratch attn_scratch_;
  MlaScratch mla_scratch_;
  BackwardScratch scratch_;
  int64_t n_targets_ = 0;
  bool has_targets_ = false;
};

}  // namespace moe
