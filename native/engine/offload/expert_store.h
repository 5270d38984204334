// Where the host-side master state of every routed expert lives: fp32 weights, gradient and the two AdamW
// moments (gradient and moments only for the expert's trained tensors, packed as Model::trainable() packs them;
// a frozen expert has none). ExpertOffload reaches that state only through this interface, so the host tier (the arenas' expert
// ranges) and the SSD tier (files behind a host cache) are interchangeable. Experts are numbered in arena
// order (ParamLayout::expert_ranges()). Implementations are thread-safe: the copy worker, the optimizer
// worker and the compute thread acquire concurrently; ordering between them is the caller's (tickets).
#pragma once
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace moe {

// w: the weights in layout order. t: the trained tensors' weights kept apart, packed like g (null when w holds
// them: the host tier, or an expert whose tensors all train or all are frozen); where t is set, w's copies of
// the trained tensors are stale.
struct ExpertState {
  float *w = nullptr, *t = nullptr, *g = nullptr, *m = nullptr, *v = nullptr;
};

// Floats of one expert's parts: weights (layout order), trained weights kept apart (0: none), and the gradient
// and each moment (trained tensors packed; 0 for a frozen expert).
struct ExpertSizes {
  size_t weights = 0, trained = 0, grads = 0;
};

// Copies every part of one expert's state that has floats, from one ExpertState to another.
inline void copy_parts(const ExpertSizes& n, const ExpertState& to, const ExpertState& from) {
  auto copy = [](float* dst, const float* src, size_t floats) {
    if (floats) std::memcpy(dst, src, floats * sizeof(float));
  };
  copy(to.w, from.w, n.weights);
  copy(to.t, from.t, n.trained);
  copy(to.g, from.g, n.grads);
  copy(to.m, from.m, n.grads);
  copy(to.v, from.v, n.grads);
}

// Parts of an expert's state, as bits: what a caller reads, overwrites whole, or changed.
enum ExpertPart : unsigned { kWeights = 1, kGrad = 2, kMoment1 = 4, kMoment2 = 8, kTrained = 16, kAllParts = 31 };

// Measured since the last take_stats().
struct ExpertStoreStats {
  int64_t hits = 0, misses = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t weight_bytes_written = 0;  // the part of bytes_written that wrote weights parts back
  double io_ms = 0;               // time spent in file reads and writes
  double read_ms = 0;             // the reads' part of it
  double prefetch_lead_ms = 0;    // mean time a prefetched expert waited in the cache before its first use
  int64_t peak_host_bytes = 0, ssd_bytes = 0;
};

class ExpertStore {
 public:
  virtual ~ExpertStore() = default;
  // Blocks until the `need` parts of expert i's state are in host memory; they stay there until the matching
  // release(). Parts in `overwrite` are handed out unread: the caller writes them whole before reading them.
  virtual ExpertState acquire(int i, unsigned need, unsigned overwrite = 0) = 0;
  // held: the parts the matching acquire() asked for (need | overwrite). dirty: the parts the caller changed
  // (they must reach the SSD before the entry is reused). consumed: parts nobody needs any more (a gradient its
  // update has applied), which need not be written back.
  virtual void release(int i, unsigned held, unsigned dirty, unsigned consumed) = 0;
  // A hint that these parts of expert i are needed soon; never blocks and never evicts an entry in use.
  virtual void prefetch(int /*i*/, unsigned /*parts*/) {}
  // Waits for background reads and writes every changed entry back.
  virtual void flush() {}
  virtual ExpertStoreStats take_stats() { return {}; }
};

// The routed experts' state as the rest of the engine reaches it when its home is apart from the arenas (an expert
// offload's SSD tier, or its host tier beside a device): checkpoints, exports and generation read it and loads
// write it one expert's part at a time, so none holds a copy of every expert. Expert k of the layout's
// expert_ranges(); kWeights: its layout range (ExpertRange begin..end) in layout order; kGrad, kMoment1, kMoment2:
// its packed range (TrainableSet::grad_expert_ranges()[k]).
class ExpertStateHome {
 public:
  virtual ~ExpertStateHome() = default;
  virtual void read_expert(int k, ExpertPart part, float* dst) = 0;
  virtual void write_expert(int k, ExpertPart part, const float* src) = 0;
  // One tensor of an expert read as bf16 words: `count` values from float `at` of its range go to `words`.
  struct Bf16Words {
    size_t at, count;
    uint16_t* words;
  };
  // Expert k's weights as read_expert(k, kWeights, dst) gives them, except the tensors listed, whose values go to
  // their words (rounded to bf16: a home whose records keep them so copies them, never widening) and whose places
  // in dst are left as they are. false, reading nothing, where the home does not keep all of them as bf16: the
  // caller reads the fp32 values and rounds them itself.
  virtual bool read_expert_bf16(int /*k*/, float* /*dst*/, const std::vector<Bf16Words>& /*tensors*/) { return false; }
};

// A store whose state is not the model's arenas' (the SSD tier; the host tier of a backend whose device memory
// is not host memory): ExpertOffload stores each expert's whole state as a fresh start initialises it, and copies
// it out to the arenas where a caller asks for every expert there (Trainer::experts_to_arenas).
class ApartExpertStore : public ExpertStore {
 public:
  // Writes an expert's whole state (each part its size in floats; parts of size 0 may be null).
  virtual void store(int i, const ExpertState& from) = 0;
  // Copies an expert's current state out.
  virtual void load(int i, const ExpertState& to) = 0;
};

// The host tier: every expert's state is its range of the model's arena (weights) and of the packed gradient and
// optimizer arenas.
class ArenaExpertStore final : public ExpertStore {
 public:
  // begins: each expert's float offset in the parameter arena; grad_begins: in the packed arenas.
  ArenaExpertStore(float* params, float* grads, float* m, float* v, std::vector<size_t> begins,
                   std::vector<size_t> grad_begins)
      : p_(params), g_(grads), m_(m), v_(v), begins_(std::move(begins)), grad_begins_(std::move(grad_begins)) {}
  ExpertState acquire(int i, unsigned, unsigned) override {
    const size_t b = grad_begins_[i];
    return {p_ + begins_[i], nullptr, g_ + b, m_ + b, v_ + b};
  }
  void release(int, unsigned, unsigned, unsigned) override {}

 private:
  float *p_, *g_, *m_, *v_;
  std::vector<size_t> begins_, grad_begins_;
};

}  // namespace moe
