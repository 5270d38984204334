// The experts' home tier (ExpertOffload's part that concerns where the master state lives): the store of the host
// or SSD tier, and moving expert state between the model's arenas and a home apart from them.
#include "offload/expert_offload.h"

#include <cstring>

#include "core/error.h"
#include "core/host_memory.h"
#include "offload/pinned_store.h"

namespace moe {
namespace {

void release_pages(float* p, size_t floats) { host_release(p, floats * sizeof(float)); }

}  // namespace

int ExpertOffload::cache_entries_for(const OffloadConfig& cfg, const std::vector<ExpertSizes>& sizes) {
  if (cfg.cache_experts > 0) return cfg.cache_experts;
  const size_t record = SsdExpertStore::record_bytes(sizes), side = SsdExpertStore::side_bytes(sizes);
  const size_t budget = static_cast<size_t>(cfg.host_budget_bytes);
  const int entries = static_cast<int>((budget > side ? budget - side : 0) / record);
  check(entries >= 4, "host tier: offload.host_budget_bytes " + std::to_string(cfg.host_budget_bytes) + " holds " +
                          std::to_string(entries) + " cached experts of " + std::to_string(record) +
                          " bytes (weights, and the trained tensors' gradient and moments) beside " +
                          std::to_string(side) + " bytes of adapters' state; the SSD tier needs at least 4, i.e. " +
                          std::to_string(side + 4 * record) + " bytes");
  return entries;
}

bool ExpertOffload::home_apart(const OffloadConfig& cfg, const Backend& be) {
  return cfg.mode == OffloadMode::Ssd || !be.device_memory_is_host();
}

void ExpertOffload::make_store(const OffloadConfig& cfg, const std::vector<ExpertSizes>& sizes, int entries,
                               size_t host_floats, const ExpertInit& init) {
  if (!home_apart(cfg, model_.backend()) && init)
    for (const Expert& x : experts_) init(x.begin, x.begin + x.floats);
  if (cfg.mode != OffloadMode::Ssd) {
    if (!model_.backend().device_memory_is_host()) {
      // Host tier beside a device: the arenas are device memory, so the experts live in page-locked host memory.
      auto pinned = std::make_unique<PinnedExpertStore>(sizes, host_);
      apart_ = pinned.get();
      store_ = std::move(pinned);
      experts_from_arenas(init);
      return;
    }
    // Host tier in the arenas: each expert's master weights, and its trained tensors' gradient and two AdamW
    // moments (the expert ranges of the parameter arena and of the packed gradient and moment arenas).
    host_.charge(host_floats * sizeof(float), "the experts' master weights, gradients and AdamW moments");
    std::vector<size_t> begins, grad_begins;
    for (const Expert& x : experts_) {
      begins.push_back(x.begin);
      grad_begins.push_back(x.grad_begin);
    }
    store_ = std::make_unique<ArenaExpertStore>(params_, grads_, optimizer_.m(), optimizer_.v(), std::move(begins),
                                                std::move(grad_begins));
    return;
  }
  auto ssd = std::make_unique<SsdExpertStore>(cfg.ssd_dir.empty() ? SsdExpertStore::fresh_dir("moe-offload") : cfg.ssd_dir, sizes, entries,
                                              cfg, host_, ssd_tier_);
  ssd->set_next_use([this](int i) { return next_use(i); });
  ssd_ = ssd.get();
  apart_ = ssd_;
  store_ = std::move(ssd);
  if (!init) {
    experts_from_arenas();
    return;
  }
  // The fresh file's zeros are every expert's gradient and moments; its weights wait for their first use.
  forget_slot_contents(true);
  init_ = init;
  uninitialised_.assign(experts_.size(), 1);
  uninitialised_left_ = experts_.size();
}

void ExpertOffload::initialise_expert(int i) {
  if (uninitialised_left_ == 0 || !uninitialised_[i]) return;
  const Expert& x = experts_[i];
  init_(x.begin, x.begin + x.floats);
  write_expert(i, kWeights, params_ + x.begin);
  release_pages(params_ + x.begin, x.floats);
}

void ExpertOffload::initialise_remaining() {
  std::lock_guard<std::mutex> lock(init_mutex_);
  if (uninitialised_left_ == 0) return;
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i) initialise_expert(i);
  apart_->flush();
  apart_->take_stats();  // start-up traffic, not a step's
}

// A home apart keeps a split expert's trained weights packed apart (t); the arenas hold them in place.
void ExpertOffload::experts_to_arenas(bool weights_only) {
  settle();
  if (!apart_) return;
  initialise_remaining();
  if (weights_only) {
    for (int i = 0; i < static_cast<int>(experts_.size()); ++i) read_expert(i, kWeights, params_ + experts_[i].begin);
    return;
  }
  std::vector<float> trained(grad_floats_);
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i) {
    const Expert& x = experts_[i];
    const size_t g = x.grad_begin;
    apart_->load(i, {params_ + x.begin, trained.data(), grads_ + g, optimizer_.m() + g, optimizer_.v() + g});
    if (x.split)
      for (const TrainedTensor& t : x.trained)
        std::memcpy(params_ + x.begin + t.at, trained.data() + t.grad_at, t.t->numel * sizeof(float));
  }
}

void ExpertOffload::read_expert(int i, ExpertPart part, float* dst) {
  const Expert& x = experts_[i];
  const unsigned parts = part == kWeights ? weight_parts(x) : static_cast<unsigned>(part);
  check(part == kWeights || part == kGrad || part == kMoment1 || part == kMoment2,
        "offload: read_expert reads weights, the gradient or a moment");
  if (part != kWeights && x.grad_floats == 0) return;  // frozen: nothing trained
  if (part == kWeights) {
    std::lock_guard<std::mutex> lock(init_mutex_);
    initialise_expert(i);
  }
  const ExpertState s = store_->acquire(i, parts);
  if (part == kWeights) {
    std::memcpy(dst, s.w, x.floats * sizeof(float));
    if (s.t)
      for (const TrainedTensor& t : x.trained)
        std::memcpy(dst + t.at, s.t + t.grad_at, t.t->numel * sizeof(float));
  } else {
    std::memcpy(dst, part == kGrad ? s.g : part == kMoment1 ? s.m : s.v, x.grad_floats * sizeof(float));
  }
  store_->release(i, parts, 0, 0);
}

void ExpertOffload::write_expert(int i, ExpertPart part, const float* src) {
  const Expert& x = experts_[i];
  check(part == kWeights || part == kMoment1 || part == kMoment2, "offload: write_expert writes weights or a moment");
  if (part != kWeights && x.grad_floats == 0) return;  // frozen: no moments
  const unsigned parts = part == kWeights ? weight_parts(x) : static_cast<unsigned>(part);
  const ExpertState s = store_->acquire(i, 0, parts);
  if (part == kWeights) {
    std::memcpy(s.w, src, x.floats * sizeof(float));
    // As experts_from_arenas: the trained tensors go apart, w's copies of them zeroed.
    if (s.t)
      for (const TrainedTensor& t : x.trained) {
        std::memcpy(s.t + t.grad_at, src + t.at, t.t->numel * sizeof(float));
        std::memset(s.w + t.at, 0, t.t->numel * sizeof(float));
      }
  } else {
    std::memcpy(part == kMoment1 ? s.m : s.v, src, x.grad_floats * sizeof(float));
  }
  store_->release(i, parts, parts, 0);
  if (part == kWeights && uninitialised_left_ > 0 && uninitialised_[i]) {
    uninitialised_[i] = 0;
    --uninitialised_left_;
  }
}

void ExpertOffload::experts_loaded() {
  settle();
  forget_slot_contents(true);
  if (!apart_) return;
  apart_->flush();
  apart_->take_stats();
}

void ExpertOffload::experts_from_arenas(const ExpertInit& init) {
  settle();
  forget_slot_contents(true);
  if (!apart_) return;
  std::vector<float> trained(grad_floats_, 0.0f);
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i) {
    const Expert& x = experts_[i];
    float *w = params_ + x.begin, *g = grads_ + x.grad_begin, *m = optimizer_.m() + x.grad_begin,
          *v = optimizer_.v() + x.grad_begin;
    if (init) init(x.begin, x.begin + x.floats);
    // w's copies of a split expert's trained tensors are stale once t holds them; zeroed, they leave a frozen
    // base from a bf16 checkpoint all bf16 values, which the SSD keeps in half the bytes. (The arena's expert
    // ranges are released right after.)
    if (x.split)
      for (const TrainedTensor& t : x.trained) {
        std::memcpy(trained.data() + t.grad_at, w + t.at, t.t->numel * sizeof(float));
        std::memset(w + t.at, 0, t.t->numel * sizeof(float));
      }
    apart_->store(i, {w, trained.data(), g, m, v});
    release_arena_expert(x);  // one expert's pages at a time: a fresh start never holds them all
  }
  apart_->flush();
  apart_->take_stats();  // start-up traffic is not a step's
}

void ExpertOffload::release_arena_expert(const Expert& x) {
  release_pages(params_ + x.begin, x.floats);
  if (x.grad_floats)
    for (float* p : {grads_, optimizer_.m(), optimizer_.v()}) release_pages(p + x.grad_begin, x.grad_floats);
}

void ExpertOffload::zero_expert_grads() {
  settle();
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i) {
    if (experts_[i].grad_floats == 0) continue;  // frozen: no gradient
    ExpertState s = store_->acquire(i, 0, kGrad);
    std::memset(s.g, 0, experts_[i].grad_floats * sizeof(float));
    store_->release(i, kGrad, kGrad, 0);
  }
}

}  // namespace moe
