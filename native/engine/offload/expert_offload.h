// Expert offload (ES-MoE §4.1/§4.3, MoESys §III-B). Every routed expert's master state (fp32 weights,
// gradient, AdamW moments) has its home in the host tier (the expert ranges of the model's and optimizer's
// arenas) or the SSD tier (a file behind a host cache), reached through an ExpertStore. The device tier holds
// the non-expert state, the activations and `slots` expert slots (weights + gradient buffer each). An expert
// computes only while it occupies a slot:
//   * plan() starts uploading the first experts of the pass (up to `lookahead` ahead of the one computing) on
//     the copy worker; weights() waits for its upload (stall time); done_forward() frees its slot. The layer may
//     hold a run of experts at once (max_held()): their weights() first, then their done_*(), in the planned
//     order; the uploads then run up to `lookahead` ahead of the run's last expert.
//   * backward also uploads the gradient accumulated by earlier micro-batches (or zeroes the slot), and
//     done_backward() queues the gradient's download and frees the slot (the copy worker is FIFO, so the next
//     upload into it runs after the download).
//   * pinned experts keep their slot for the whole step: uploaded once, gradient accumulated in the slot over
//     all micro-batches and downloaded once.
//   * host optimizer: each expert's AdamW runs on a host backend's pool, separate from the compute pool. When it
//     starts is the `optimizer` mode: after the expert's last backward of the step (expert), after its layer's
//     (layer), or — with clipping, for both — once the global norm is known; the updates run on into the next
//     step and an expert's next upload waits for its own update only, so no step sees stale weights. `delayed`
//     applies the previous step's gradient instead (one step stale, an ablation baseline).
//   * SSD tier: the pass's experts and the next MoE layer's (forward: the experts it used last time; backward:
//     the ones its forward used) are prefetched into the host cache in that order, a fixed lead ahead of the
//     expert computing (plan() sends the lead, each finished expert one more); the updates after backward are
//     read ahead the same way.
//   * a fine-tune (Model::trainable()): gradient and moments exist for trained tensors only, packed as the
//     model's gradient arena packs them; a frozen expert is uploaded read-only (no gradient bytes, no update, no
//     write-back), and an expert with trained and frozen tensors (LoRA adapters on a frozen base) moves and
//     writes back only its trained part after the update.
//   * mapped slots (a backend whose device memory is host memory; expert_mapped.cpp): an expert computes on its
//     host copy in place, held in the store from its "upload" to its done_*(); a slot is its gradient buffer alone.
// The copies and kernels are the ones resident training runs on the same values in the same order, so losses
// and weights are bit-identical to resident training (except `delayed`).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/model.h"
#include "offload/expert_access.h"
#include "offload/expert_store.h"
#include "offload/memory_tier.h"
#include "offload/pin_selector.h"
#include "offload/serial_worker.h"
#include "offload/ssd_store.h"
#include "optim/optimizer.h"

namespace moe {

// What one step of offload did, all measured.
struct OffloadStepStats {
  double upload_ms = 0;         // copy-worker time spent uploading
  double upload_hidden_ms = 0;  // the part of it compute did not wait for
  double stall_ms = 0;          // compute waiting for uploads
  int64_t bytes_h2d = 0, bytes_d2h = 0;
  int64_t peak_device_bytes = 0, peak_host_bytes = 0, peak_ssd_bytes = 0;
  ExpertStoreStats store;  // SSD tier: cache hits and misses, bytes and time of file I/O, prefetch lead
  int slots = 0, pin_slots = 0, cache_entries = 0;
  uint8_t home_tier = 1;                      // 1 host, 2 SSD
  std::vector<std::vector<uint8_t>> pinned;   // [MoE layer][expert]
  std::vector<std::vector<int32_t>> uploads;  // [MoE layer][expert]: weight uploads this step
};

// The host compute of expert offload, given by the caller: `updates` runs the expert updates (the optimizer
// worker, separate from the compute pool), `norms` the gradient norms (one thread: the copy worker or, when it is
// idle, the compute thread; beside a device, only gradients that never went through a slot's final download).
// Two backends because the two workers call them at the same time.
struct HostBackends {
  std::unique_ptr<Backend> updates, norms;
};

// Fills [begin, end) of the parameter arena with an expert's initial weights (Model::init_range).
using ExpertInit = std::function<void(size_t begin, size_t end)>;

class ExpertOffload final : public ExpertAccess {
 public:
  // B, T: the micro-batch the activations are sized for. init: set when the arenas' expert ranges are not
  // initialised yet (a fresh model, Model::init without experts): a home apart initialises each expert in its
  // arena range just before storing it and hands those pages back right after, so a start-up never holds every
  // expert's state at once; the arenas as home initialise them all in place. The SSD tier's fresh file reads as
  // zeros, so its gradients and moments are right from the start: each expert's initial weights are written when
  // first needed (initialise_remaining(), a read), unless a load writes the expert first, so a start from a
  // checkpoint never computes and writes the expert state it then overwrites.
  ExpertOffload(Model& model, AdamWOptimizer& optimizer, const OffloadConfig& cfg, HostBackends host, int B, int T,
                const ExpertInit& init = {});
  ~ExpertOffload() override;

  int slots() const { return static_cast<int>(slots_.size()); }
  int pin_slots() const { return pin_slots_; }
  int cache_entries() const { return ssd_ ? ssd_->entries() : 0; }
  const SsdExpertStore* ssd_store() const { return ssd_; }  // null unless the home is the SSD tier
  size_t expert_bytes() const { return expert_floats_ * sizeof(float); }     // the largest expert's weights
  size_t expert_grad_bytes() const { return grad_floats_ * sizeof(float); }  // ... and its trained part
  const MemoryTier& device_tier() const { return device_; }
  const MemoryTier& host_tier() const { return host_; }
  const MemoryTier& ssd_tier() const { return ssd_tier_; }
  // The last end_step's stats, with what the step record does not carry (weight uploads per expert).
  const OffloadStepStats& last_step_stats() const { return stats_; }

  // The step protocol the trainer follows.
  void begin_step(int t, double lr, const TrainConfig& hp);
  void begin_micro(int micro, int count);
  void finish_gradients();                        // waits for every gradient download
  double expert_sum_squares(int i) const { return sum_squares_[i]; }  // after finish_gradients()
  void start_expert_updates(double clip_scale);  // once the norm is known
  // Returns with the expert updates still running (unless optimizer_overlap is off); the next use of an
  // expert waits for its own.
  OffloadStepStats end_step(const std::vector<std::vector<int32_t>>& step_tokens);
  // Waits for every copy, update and prefetch.
  void settle();
  // A home apart from the arenas (the SSD tier; the host tier of a backend whose device memory is not host
  // memory): copy every expert's state into the arenas (before tensor reads, exports, generation; weights_only:
  // the parameters alone, a quarter of it), and take the arenas' expert state as the new master copy, releasing
  // their pages (after loads). No-ops where the master copy is the arenas.
  void experts_to_arenas(bool weights_only = false);
  void experts_from_arenas(const ExpertInit& init = {});
  // Whether the master state lives in a home apart (experts_to_arenas() copies it back); the arenas otherwise.
  bool experts_apart() const { return apart_ != nullptr; }
  // Expert i's current weights (kWeights: its layout range, trained tensors kept apart put in place), gradient or
  // one moment (kGrad, kMoment1, kMoment2: its packed range) into dst, from its home; after settle(). Checkpoints,
  // exports and tensor reads stream an expert at a time this way instead of copying every expert into the arenas.
  void read_expert(int i, ExpertPart part, float* dst);
  // The inverse: replaces expert i's weights or one moment in its home with src's (a load streaming a checkpoint
  // an expert at a time); after settle(). experts_loaded() follows the last.
  void write_expert(int i, ExpertPart part, const float* src);
  // After a load changed expert state in the arenas or through write_expert: no slot keeps an old copy, and the
  // load's traffic is not counted as a step's.
  void experts_loaded();
  // Writes the initial weights of every expert that neither a load nor an earlier call has written (the SSD
  // tier's deferred start-up); before the first step, and at the first pass outside one. Cheap once done.
  void initialise_remaining();
  // Zeroes every expert's gradient (a gradient pass outside training starts from zero, as resident's does).
  void zero_expert_grads();

  void plan(int layer, ExpertPass pass, const std::vector<int>& experts) override;
  FfnParams weights(int layer, int e) override;
  FfnParams grads(int layer, int e) override;
  void done_forward(int layer, int e) override;
  void done_backward(int layer, int e) override;
  // Experts computed as one run: up to the lookahead while half the streaming slots can hold them, so the next
  // run's uploads have slots while this one computes (1 with mapped slots, whose held experts fill the cache).
  int max_held() const override;

 private:
  struct Slot {
    TierBlock w, g;
    TierBlock w16;    // bf16 compute: the bf16 copy of its expert's linear weights (uploaded, or made in place)
    int bf16_of = -1;  // the expert whose current weights w16 holds (-1: none)
    uint64_t ticket = 0;  // the upload that filled it
    // When that upload's copies ran (equal when it copied nothing): the part of a stall inside this interval was
    // spent waiting for the copy, the rest for the expert's update or earlier queued copies.
    std::chrono::steady_clock::time_point copy_from{}, copy_to{};
    int holds = -1;       // the expert whose weights it still holds (within a step weights change only by an
                          // expert's update, which starts after its last use of the step)
    bool trained_stale = false;  // holds a split expert's frozen base, but its trained tensors from before an update
    // Mapped: the host state its expert computes on, held in the store (the parts in mapped_parts) until done.
    ExpertState mapped;
    unsigned mapped_parts = 0;
    int mapped_expert = -1;
  };
  // A trained tensor of an expert: at its layout offset and its packed (gradient) offset, both from the
  // expert's start.
  struct TrainedTensor {
    const ParamTensor* t;
    size_t at, grad_at;
  };
  struct Expert {
    int layer = 0, moe_layer = 0, e = 0;
    size_t begin = 0, floats = 0;             // its range in the parameter arena
    size_t grad_begin = 0, grad_floats = 0;   // its range in the packed gradient and moment arenas (0: frozen)
    bool split = false;                       // trained and frozen tensors both (the SSD keeps the trained apart)
    size_t pending_at = 0;                    // `delayed`: its place in pending_
    std::vector<TrainedTensor> trained;       // for the optimizer
    size_t in_at = 0, in_n = 0, out_at = 0, out_n = 0;  // its two linear weights, from its start (bf16 copies)
    bool trains_linear = false;                         // an update changes one of them
    // bf16 compute: a slot keeps the two linear weights only in its bf16 copy, the first (by offset) at 0 and the
    // second after the first's padded span, and leaves their spans out of its fp32 block, which holds the other
    // tensors (biases, adapters) in layout order. Both spans are 0 in fp32, where the slot mirrors the layout.
    size_t lin_at[2] = {0, 0}, lin_span[2] = {0, 0};
    size_t linear_span() const { return lin_span[0] + lin_span[1]; }
    // A non-linear tensor's offset (from the expert's start) in the slot's fp32 block.
    size_t slot_at(size_t at) const {
      return at - (lin_at[0] < at ? lin_span[0] : 0) - (lin_at[1] < at ? lin_span[1] : 0);
    }
    // A linear weight's element in the slot's bf16 copy.
    size_t bf16_at(size_t at) const { return at < lin_at[1] ? at - lin_at[0] : lin_span[0] + (at - lin_at[1]); }
    bool in_linear(size_t at) const {
      for (int k = 0; k < 2; ++k)
        if (at >= lin_at[k] && at < lin_at[k] + lin_span[k]) return true;
      return false;
    }
    int slot = -1;                            // occupied slot, -1 when only on the host
    int pin_slot = -1;                        // its reserved slot this step, -1 when not pinned
    bool grad_down = false;     // the host gradient holds this step's earlier micro-batches
    bool grad_in_slot = false;  // a pinned expert's slot holds gradient not yet downloaded
    bool updated = false;       // its optimizer update for this step was submitted
  };

  int id(int layer, int e) const { return layer_base_[layer] + e; }
  // The parts an upload of x's weights reads, and the part an update of x's weights changes.
  static unsigned weight_parts(const Expert& x) { return kWeights | (x.split ? kTrained : 0u); }
  static unsigned updated_weights(const Expert& x) { return x.split ? kTrained : kWeights; }
  // SSD tier: the host cache's entries (offload.cache_experts, or what offload.host_budget_bytes holds).
  static int cache_entries_for(const OffloadConfig& cfg, const std::vector<ExpertSizes>& sizes);
  // Whether the experts' master state lives apart from the model's arenas (the SSD tier; the host tier beside a
  // device, whose arenas are device memory).
  static bool home_apart(const OffloadConfig& cfg, const Backend& be);
  void make_store(const OffloadConfig& cfg, const std::vector<ExpertSizes>& sizes, int entries, size_t host_floats,
                  const ExpertInit& init);
  void release_arena_expert(const Expert& x);
  void choose_copy_stream(const OffloadConfig& cfg, int entries);
  // Mapped: the expert's parameters as pointers into the host state it computes on, and the hold's end.
  FfnParams map_params(int layer, int e, const ExpertState& host) const;
  void unmap(Slot& s);
  void enter_idle();
  // Slots holding a frozen expert keep it across steps (its weights never change), and a split expert's frozen
  // base (only its trained tensors are uploaded again), unless `all`.
  void forget_slot_contents(bool all);
  // Whether a slot still holds expert i's frozen base with stale trained tensors.
  bool base_in_slot(int i) const;
  // bf16 compute: points f's bf16 weights at the slot's copy, converting f's fp32 weights first unless the
  // copy already holds expert i's current ones (an upload wrote it; a mapped slot converts here).
  void bf16_weights(Slot& s, int i, FfnParams& f);
  // Uploads n floats of x's weights from src to its slot at `at` (from the expert's start): as they are, or under
  // bf16 compute its linear weights converted to bf16 into the slot's copy (on the host: half the bytes move).
  // upload_bytes: the bytes that moves, counted when the upload is issued.
  void upload_weights(const Expert& x, size_t at, const float* src, size_t n, float* w_dst, uint16_t* w16_dst);
  size_t upload_bytes(const Expert& x, size_t at, size_t n) const;
  // The elements of x's k-th linear weight by offset (its span less the layout's padding).
  static size_t linear_numel(const Expert& x, int k) { return x.lin_at[k] == x.in_at ? x.in_n : x.out_n; }
  void issue_ahead();
  void issue(int id);
  void issue_mapped(int id);
  void release(int id);
  void prefetch_for(int layer, ExpertPass pass);
  // SSD tier: how many experts a sweep reads ahead of the one computing (0: none).
  size_t prefetch_lead() const;
  // Hands up to n more of ahead_ to the prefetch worker.
  void send_prefetches(size_t n);
  void prefetch_weights(int id);
  // A slot now holds `holder`'s weights in place of `was`'s (-1: none), for the next-use eviction.
  void note_slot_holder(int was, int holder);
  void download_grad(int id, bool final, bool then_update);
  struct UpdateStep {
    int t;
    double lr, clip_scale;
  };
  void apply_adamw(const Expert& x, const ExpertState& s, const float* grad, const UpdateStep& step,
                   const TrainConfig& hp);
  // The parts an update of x reads (the gradient only when its download happened this step).
  static unsigned update_parts(const Expert& x) {
    return updated_weights(x) | kMoment1 | kMoment2 | (x.grad_down ? kGrad : 0u);
  }
  // ahead (SSD tier, -1: none): an expert whose update comes later; the update's start asks the store to read
  // ahead_parts of it.
  void submit_update(int id, bool zero_grad, int ahead = -1, unsigned ahead_parts = 0);
  void submit_delayed_update(int id, bool zero_grad);
  void update_layer(int layer);
  bool updates_at_backward() const;
  static FfnParams rebase(const FfnParams& f, const float* from, float* to);
  // x's parameters in a slot's fp32 block w (at slot_at; bf16: its linear weights null, in the slot's copy).
  FfnParams slot_params(const Expert& x, float* w) const;
  void add_upload_time(double ms);
  void charge_activations();

  Model& model_;
  AdamWOptimizer& optimizer_;
  const OffloadConfig cfg_;
  float *params_, *grads_;  // the arenas (the host tier's master copy)
  MemoryTier device_, host_, ssd_tier_;
  std::unique_ptr<ExpertStore> store_;
  SsdExpertStore* ssd_ = nullptr;     // store_ when the home is the SSD tier
  ApartExpertStore* apart_ = nullptr;  // store_ when it is not the arenas (the SSD tier, or pinned_store.h's)
  size_t expert_floats_ = 0;       // the largest expert's weights
  size_t slot_floats_ = 0;         // a slot's fp32 weights: the largest expert's, less its linear spans in bf16
  size_t slot_bf16_ = 0;           // bf16 compute: a slot's bf16 copy, the largest expert's linear spans
  size_t grad_floats_ = 0;         // the largest expert's gradient (trained tensors)
  size_t activations_charged_ = 0;
  std::vector<int> layer_base_;  // model layer -> first expert id (-1: dense layer)
  std::vector<int> moe_model_layers_;
  std::vector<Expert> experts_;
  std::vector<Slot> slots_;
  std::vector<int> free_;  // streaming slots, FIFO
  int pin_slots_ = 0;
  PinSelector pins_;
  std::vector<std::vector<uint8_t>> pinned_;
  std::vector<std::vector<int>> forward_order_;  // [MoE layer] experts its latest forward computed
  // Where the schedule is, for the next-use cache policy: the MoE layer in hand and the sweep's direction
  // (forward and the optimizer ascend, backward descends), packed as layer * 2 + descending.
  std::atomic<int64_t> sweep_{0};
  int64_t next_use(int expert) const;

  // Current pass.
  int layer_ = -1;
  ExpertPass pass_ = ExpertPass::Forward;
  std::vector<int> order_;
  // order_[cursor_] is the first expert not yet done, order_[requested_] the next whose weights() comes, and
  // order_[next_issue_] the next to upload.
  size_t cursor_ = 0, requested_ = 0, next_issue_ = 0;
  size_t keep_from_ = 0;  // the pass's experts from here on stay in their streaming slots to its end
  std::vector<int> ahead_;  // SSD tier: the experts wanted next (this pass's rest, the next MoE layer's likely ones)
  size_t ahead_sent_ = 0;   // how many of them went to the prefetch worker
  bool last_micro_ = true;

  // Current step (in_step_ false: a pass outside training, which never updates experts).
  bool in_step_ = false;
  int t_ = 0;
  double lr_ = 0;
  double clip_scale_ = 1;  // set before any clipped update is submitted
  TrainConfig hp_;
  OffloadStepStats stats_;
  std::atomic<int64_t> upload_ns_{0};
  double copy_stall_ms_ = 0;  // the stall spent while an awaited upload's copies ran (compute thread only)
  std::vector<double> sum_squares_;  // per expert: its final gradient's squared norm this step
  std::unique_ptr<std::atomic<uint64_t>[]> update_ticket_;  // per expert: its latest update on optimizer_worker_
  // Per expert: a slot holds its weights (its upload finished), so its cache entry's weights are not needed
  // while that lasts; read by the next-use eviction on the store's threads.
  std::unique_ptr<std::atomic<bool>[]> in_slot_;

  // `delayed`: each expert's gradient of the previous step, applied with that step's hyper-parameters.
  TierBlock pending_;
  bool pending_valid_ = false;
  // The SSD tier's deferred start-up: the experts whose initial weights are not written yet, and how to make them.
  ExpertInit init_;
  std::vector<char> uninitialised_;
  std::atomic<size_t> uninitialised_left_{0};
  std::mutex init_mutex_;
  void initialise_expert(int i);  // under init_mutex_
  int pending_t_ = 0;
  double pending_lr_ = 0, pending_scale_ = 1;

  bool bf16_ = false;           // train.compute_dtype bf16: the slots also hold their experts' bf16 copies
  TierBlock bf16_staging_;      // ... converted on the host into here before their upload, beside a device
  bool inline_copies_ = false;  // uploads run on the compute thread (offload.copy_stream)
  bool mapped_ = false;         // experts compute on their host copies; slots hold gradients only
  HostBackends host_compute_;
  SerialWorker copy_worker_, optimizer_worker_;
};

}  // namespace moe
