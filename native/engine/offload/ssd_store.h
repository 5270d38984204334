// The SSD tier (ES-MoE §4.3, MoESys §III-B): every expert's state is one record of a file in the run
// directory — weights, gradient, first and second moment, each part 4 KiB aligned and sized for that expert (a
// frozen expert's record is its weights alone). An expert with trained tensors on a frozen base (LoRA adapters)
// keeps the trained part, its gradient and moments in host memory, a few percent of its weights, so the
// optimizer never waits on the disk and the cache holds frozen bases only; its record is its weights. Records
// are read and written with direct (unbuffered) I/O where the file system allows it, and reached only through a
// host cache of `entries` records charged to the host tier. An entry tracks which parts it holds and which changed, so an
// upload reads only the weights, a gradient download reads nothing, and only changed parts are written back
// (adjacent parts in one request): a fine-tune whose trained tensors are kept apart never writes the frozen
// weights back. Weights that are all bf16 values (a fine-tune's frozen base loaded from a bf16 checkpoint) are
// kept as their high halves, so their reads move half the bytes. Eviction picks an entry nobody holds:
//   * LRU: the least recently released (ES-MoE).
//   * LFU (MoESys Algorithm 2): each cached expert counts its hits; every `decay_every` requests all counts
//     are multiplied by `decay`; the victim is the entry with the fewest hits among those with at least
//     `threshold` hits (a new entry is on probation until then). Algorithm 2 would bypass the cache when no
//     entry qualifies; here the CPU optimizer needs the state in host memory, so the fewest-hits entry goes.
//   * next-use: the entry whose expert the schedule needs last (Belady's choice, from the pass order the
//     offload engine knows: forward ascends the MoE layers, backward descends them).
// A changed (dirty) entry is written back when it is evicted and on flush().
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/config.h"
#include "offload/expert_store.h"
#include "offload/memory_tier.h"
#include "offload/serial_worker.h"

namespace moe {

class SsdExpertStore final : public ApartExpertStore {
 public:
  // sizes: floats per expert and part. dir is created if needed; the file is removed on destruction.
  SsdExpertStore(const std::string& dir, const std::vector<ExpertSizes>& sizes, int entries, const OffloadConfig& cfg,
                 MemoryTier& host, MemoryTier& ssd);
  ~SsdExpertStore() override;

  // next-use policy: how far in the future expert i is needed (larger: later), asked under the store's lock.
  void set_next_use(std::function<int64_t(int expert)> next_use) { next_use_ = std::move(next_use); }

  ExpertState acquire(int i, unsigned need, unsigned overwrite = 0) override;
  void release(int i, unsigned held, unsigned dirty, unsigned consumed) override;
  void prefetch(int i, unsigned parts) override;
  void flush() override;
  ExpertStoreStats take_stats() override;

  // To and from its record.
  void store(int i, const ExpertState& from) override;
  void load(int i, const ExpertState& to) override;

  // Bytes of one cache entry (it holds any expert's record) and of the whole file, for these expert sizes.
  static size_t record_bytes(const std::vector<ExpertSizes>& sizes);
  static size_t file_bytes(const std::vector<ExpertSizes>& sizes);
  // Host bytes of the split experts' trained parts, gradients and moments (held beside the cache).
  static size_t side_bytes(const std::vector<ExpertSizes>& sizes);
  // A directory name of its own under the system's temporary directory: prefix-PID-N.
  static std::string fresh_dir(const std::string& prefix);

  int entries() const { return static_cast<int>(entries_.size()); }
  // Bytes the file may still take on its disk: the least it comes to hold (frozen weights compact) less what its
  // blocks hold now, so a check of other writes to that disk (checkpoints) can count them.
  int64_t disk_bytes_to_come() const;
  bool direct_io() const { return direct_; }
  const std::string& path() const { return path_; }

 private:
  enum class State { Free, Loading, Ready, Writing };
  struct Entry {
    float* buf = nullptr;
    int expert = -1;
    int refs = 0;
    unsigned valid = 0, dirty = 0;  // ExpertPart bits
    State state = State::Free;
    uint64_t last_use = 0;
    double hits = 0;
    std::chrono::steady_clock::time_point prefetched{};  // set while a prefetched record waits for its first use
    bool was_prefetched = false;
  };

  int find_victim() const;  // under the lock; -1 when every entry is held or busy
  int claim(std::unique_lock<std::mutex>& lock, int i, bool wait);  // under the lock
  // Under the lock: reads the parts of `need` entry e lacks (the lock is released meanwhile).
  void fill(std::unique_lock<std::mutex>& lock, int e, unsigned need);
  void write_back(std::unique_lock<std::mutex>& lock, int e);
  void transfer_unlocked(std::unique_lock<std::mutex>& lock, int e, unsigned parts, bool write);
  void note_request();
  // Reads or writes the given parts of expert i's record, one request per run of adjacent parts.
  // weights_bytes: adds the bytes of the weights part moved.
  size_t transfer(int i, float* buf, unsigned parts, bool write, size_t* weights_bytes = nullptr);
  size_t transfer_weights(int i, float* buf, bool write);
  void move_bytes(int i, char* data, size_t file_at, size_t bytes, bool write);
  ExpertState parts(int i, float* buf) const;
  // Construction's stages, and what undoes them (also on a failure part way).
  void open_file(size_t file_bytes);
  void allocate_cache(int entries);
  void release();

  std::string dir_, path_;
  bool made_dir_ = false;
  bool owns_file_ = false;    // made here, or truncated here: removed at the end
  bool ssd_charged_ = false;  // the file's bytes are booked in the SSD tier
  int fd_ = -1;
  bool direct_ = false;
  std::vector<ExpertSizes> sizes_;
  std::vector<size_t> record_at_;  // each expert's record's byte offset in the file
  size_t entry_bytes_ = 0;
  size_t buf_at_[4] = {};          // each part's byte offset in a cache entry: weights, gradient, 2 moments
  CachePolicy policy_;
  double threshold_, decay_;
  int decay_every_;
  MemoryTier& host_;
  MemoryTier& ssd_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  std::vector<int> where_;  // expert -> entry, -1 when not cached
  // Per expert: its record's weights are compact (bf16 high halves). Each expert's element is touched only by
  // the one transfer that holds its entry busy.
  std::vector<uint8_t> compact_;
  float* side_block_ = nullptr;  // the split experts' side parts, one block
  std::vector<float*> side_;     // per expert: its trained part, then gradient and moments; null: none
  uint64_t clock_ = 0;
  int requests_ = 0;
  ExpertStoreStats stats_;
  double lead_ms_sum_ = 0;
  int64_t lead_count_ = 0;
  std::function<int64_t(int)> next_use_;
  SerialWorker io_worker_;  // background prefetch reads
};

}  // namespace moe
