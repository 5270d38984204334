#include "offload/ssd_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fsutil.h"

namespace moe {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlign = 4096;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The parts of a record in file order: weights, gradient, moments (an update's gradient + moments are one run).
// A trained part kept apart from a frozen base never reaches the file (see in_file below).
constexpr int kParts = 4;
constexpr unsigned kFileOrder[kParts] = {kWeights, kGrad, kMoment1, kMoment2};

// Bytes of each part of a record with these sizes, in file order, 4 KiB aligned.
void part_bytes(const ExpertSizes& s, size_t out[kParts]) {
  out[0] = round_up(s.weights * sizeof(float), kAlign);
  out[1] = out[2] = out[3] = round_up(s.grads * sizeof(float), kAlign);
}

// A split expert (trained tensors kept apart from a frozen base: LoRA adapters) keeps its trained part, gradient
// and moments in host memory; its record and its cache entries hold the frozen weights alone.
bool has_side(const ExpertSizes& s) { return s.trained > 0; }
ExpertSizes in_file(const ExpertSizes& s) { return has_side(s) ? ExpertSizes{s.weights, 0, 0} : s; }
size_t side_floats(const ExpertSizes& s) { return has_side(s) ? s.trained + 3 * s.grads : 0; }
constexpr unsigned kSideParts = kTrained | kGrad | kMoment1 | kMoment2;

ExpertSizes largest(const std::vector<ExpertSizes>& sizes) {
  ExpertSizes l;
  for (const ExpertSizes& x : sizes) {
    const ExpertSizes s = in_file(x);
    l.weights = std::max(l.weights, s.weights);
    l.grads = std::max(l.grads, s.grads);
  }
  return l;
}

size_t sum(const size_t b[kParts]) { return b[0] + b[1] + b[2] + b[3]; }

// The fewest bytes the file can come to hold: a weights-only record (a frozen expert) may be compact, half its
// weights' bytes (see bf16_exact below), which only its first write tells; every other record is whole.
size_t least_file_bytes(const std::vector<ExpertSizes>& sizes) {
  size_t total = 0;
  for (const ExpertSizes& x : sizes) {
    const ExpertSizes s = in_file(x);
    size_t b[kParts];
    part_bytes(s, b);
    total += s.grads == 0 ? round_up(s.weights * sizeof(uint16_t), kAlign) : sum(b);
  }
  return total;
}

// Compact weights: when every float of an expert's weights is a bf16 value widened (its low 16 bits zero, as
// every weight loaded from a bf16 checkpoint and never trained is), the record holds just the high halves, so
// reads of a fine-tune's frozen base move half the bytes and give back the same floats bit for bit.
bool bf16_exact(const float* w, size_t n) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(w);
  uint32_t low = 0;
  for (size_t j = 0; j < n; ++j) {
    low |= bits[j] & 0xFFFFu;
    if ((j & 4095) == 4095 && low) return false;  // trained weights fail within the first block
  }
  return low == 0;
}

void narrow(const float* w, uint16_t* out, size_t n) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(w);
  for (size_t j = 0; j < n; ++j) out[j] = static_cast<uint16_t>(bits[j] >> 16);
}

// Widens n high halves at the start of buf into n floats in place: descending, each float lands on halves
// already read.
void widen_in_place(float* buf, size_t n) {
  const uint16_t* half = reinterpret_cast<const uint16_t*>(buf);
  uint32_t* bits = reinterpret_cast<uint32_t*>(buf);
  for (size_t j = n; j-- > 0;) bits[j] = static_cast<uint32_t>(half[j]) << 16;
}

}  // namespace

SsdExpertStore::SsdExpertStore(const std::string& dir, const std::vector<ExpertSizes>& sizes, int entries,
                               const OffloadConfig& cfg, MemoryTier& host, MemoryTier& ssd)
    : dir_(dir),
      sizes_(sizes),
      policy_(cfg.cache_policy),
      threshold_(cfg.lfu_threshold),
      decay_(cfg.lfu_decay),
      decay_every_(cfg.lfu_decay_every),
      host_(host),
      ssd_(ssd),
      where_(sizes.size(), -1),
      compact_(sizes.size(), 0) {
  check(entries >= 4, "offload.cache_experts: the SSD tier's host cache needs at least 4 entries (the copy, "
                      "optimizer and prefetch workers and the compute thread each hold one), got " +
                          std::to_string(entries));
  size_t entry_parts[kParts];
  part_bytes(largest(sizes_), entry_parts);
  for (int k = 1; k < kParts; ++k) buf_at_[k] = buf_at_[k - 1] + entry_parts[k - 1];
  entry_bytes_ = sum(entry_parts);
  size_t at = 0;
  for (const ExpertSizes& x : sizes_) {
    record_at_.push_back(at);
    size_t b[kParts];
    part_bytes(in_file(x), b);
    at += sum(b);
  }
  // A failure from here on leaves the disk and the tiers as they were (a stale file of a crashed run stays).
  try {
    open_file(at);
    allocate_cache(entries);
  } catch (...) {
    release();
    throw;
  }
}

void SsdExpertStore::open_file(size_t file_bytes) {
  std::error_code ec;
  made_dir_ = std::filesystem::create_directories(dir_, ec);
  check(!ec, "offload.ssd_dir: cannot create " + dir_ + ": " + ec.message());
  path_ = (std::filesystem::path(dir_) / "experts.bin").string();
  owns_file_ = !std::filesystem::exists(path_, ec);
  // Direct I/O keeps the page cache out of the measurement and of host memory; some file systems
  // (tmpfs) refuse it, and then the file is read through the page cache.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT, 0600);
  check(fd_ >= 0, "offload.ssd_dir: cannot create " + path_ + ": " + std::strerror(errno));
  // One store per file: a second run or chat writing its experts into the same file would corrupt the first without
  // a word. The lock goes with its holder (also a crashed process), so only a live store refuses the next. A file
  // system without locks (some network mounts) runs unguarded rather than not at all.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && (errno == EWOULDBLOCK || errno == EAGAIN))
    fail("offload.ssd_dir: " + path_ + " is in use by another run or chat; give each its own ssd_dir");
  // A disk too small would otherwise fail a write some way into the run (a frozen base's first eviction can come
  // late): said now, before anything is truncated. The file's own blocks come back when it is truncated below.
  const int64_t free = fs::free_bytes(dir_);
  const int64_t writable = free < 0 ? -1 : free + fs::allocated_bytes(path_);
  const size_t least = least_file_bytes(sizes_);
  if (writable >= 0 && static_cast<size_t>(writable) < least)
    fail("offload.ssd_dir: the SSD tier's expert file needs " + fs::size_text(least) +
         (least < file_bytes ? " at least (" + fs::size_text(file_bytes) + " unless the frozen weights are bf16 values)"
                             : std::string()) +
         " (every expert's weights, and the trained tensors' gradient and AdamW moments) and " + dir_ + " has " +
         fs::size_text(static_cast<size_t>(writable)) + " free; free space there or point offload.ssd_dir at a larger "
         "disk");
  ssd_.charge(file_bytes, "every expert's weights, and the trained tensors' gradient and AdamW moments");
  ssd_charged_ = true;
  // Sized from zero: every record reads as zeros until written (a crashed run's file is not reused as it was).
  owns_file_ = true;
  if (::ftruncate(fd_, 0) != 0 || ::ftruncate(fd_, static_cast<off_t>(file_bytes)) != 0) {
    const int err = errno;  // before the message's allocations
    fail(path_ + ": cannot size the expert file to " + std::to_string(file_bytes) + " bytes: " + std::strerror(err));
  }
}

void SsdExpertStore::allocate_cache(int entries) {
  entries = std::min<int>(entries, static_cast<int>(sizes_.size()));
  entries_.resize(entries);
  const size_t side = side_bytes(sizes_);
  if (side) {
    host_.charge(side, "the adapters' weights, gradients and AdamW moments (kept in host memory)");
    side_block_ = static_cast<float*>(std::aligned_alloc(kAlign, round_up(side, kAlign)));
    if (side_block_ == nullptr) {
      host_.uncharge(side);
      fail("out of host memory for the adapters' state");
    }
    std::memset(side_block_, 0, side);
  }
  for (size_t i = 0, at = 0; i < sizes_.size(); at += side_floats(sizes_[i]), ++i)
    side_.push_back(has_side(sizes_[i]) ? side_block_ + at : nullptr);
  for (int e = 0; e < entries; ++e) {
    host_.charge(entry_bytes_, "host cache entry " + std::to_string(e) + " (an expert's state)");
    entries_[e].buf = static_cast<float*>(std::aligned_alloc(kAlign, std::max(entry_bytes_, kAlign)));
    if (entries_[e].buf == nullptr) {
      host_.uncharge(entry_bytes_);
      fail("out of host memory for the SSD tier's cache");
    }
  }
}

// What the store holds: a cache entry's bytes are booked exactly while it has a buffer, the side parts' while
// their block exists.
void SsdExpertStore::release() {
  for (Entry& x : entries_) {
    if (!x.buf) continue;
    std::free(x.buf);
    x.buf = nullptr;
    host_.uncharge(entry_bytes_);
  }
  if (side_block_) {
    std::free(side_block_);
    side_block_ = nullptr;
    host_.uncharge(side_bytes(sizes_));
  }
  if (ssd_charged_) ssd_.uncharge(file_bytes(sizes_));
  ssd_charged_ = false;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  if (owns_file_) std::filesystem::remove(path_, ec);
  if (made_dir_) std::filesystem::remove(dir_, ec);
}

SsdExpertStore::~SsdExpertStore() {
  io_worker_.drain();
  release();
}

int64_t SsdExpertStore::disk_bytes_to_come() const {
  return std::max<int64_t>(0, static_cast<int64_t>(least_file_bytes(sizes_)) - fs::allocated_bytes(path_));
}

size_t SsdExpertStore::record_bytes(const std::vector<ExpertSizes>& sizes) {
  size_t b[kParts];
  part_bytes(largest(sizes), b);
  return sum(b);
}

size_t SsdExpertStore::file_bytes(const std::vector<ExpertSizes>& sizes) {
  size_t total = 0;
  for (const ExpertSizes& x : sizes) {
    size_t b[kParts];
    part_bytes(in_file(x), b);
    total += sum(b);
  }
  return total;
}

size_t SsdExpertStore::side_bytes(const std::vector<ExpertSizes>& sizes) {
  size_t floats = 0;
  for (const ExpertSizes& x : sizes) floats += side_floats(x);
  return floats * sizeof(float);
}

std::string SsdExpertStore::fresh_dir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
      .string();
}

ExpertState SsdExpertStore::parts(int i, float* buf) const {
  if (float* side = side_[i]) {
    const size_t t = sizes_[i].trained, g = sizes_[i].grads;
    return {buf ? buf + buf_at_[0] / sizeof(float) : nullptr, side, side + t, side + t + g, side + t + 2 * g};
  }
  auto at = [&](int k) { return buf + buf_at_[k] / sizeof(float); };
  return {at(0), nullptr, at(1), at(2), at(3)};
}

size_t SsdExpertStore::transfer(int i, float* buf, unsigned parts, bool write, size_t* weights_bytes) {
  // The requests: each wanted part that has bytes, merged with the previous one where both the file and the
  // entry continue it.
  struct Run {
    size_t file, entry, bytes;
  };
  std::vector<Run> runs;
  size_t b[kParts];
  part_bytes(in_file(sizes_[i]), b);
  size_t file_at = record_at_[i];
  size_t moved = 0;
  if ((parts & kWeights) && b[0]) {
    moved += transfer_weights(i, buf, write);
    if (weights_bytes) *weights_bytes += moved;
    parts &= ~kWeights;
  }
  for (int k = 0; k < kParts; file_at += b[k], ++k) {
    if (!(parts & kFileOrder[k]) || b[k] == 0) continue;
    if (!runs.empty() && runs.back().file + runs.back().bytes == file_at &&
        runs.back().entry + runs.back().bytes == buf_at_[k])
      runs.back().bytes += b[k];
    else
      runs.push_back({file_at, buf_at_[k], b[k]});
  }
  for (const Run& r : runs) {
    move_bytes(i, reinterpret_cast<char*>(buf) + r.entry, r.file, r.bytes, write);
    moved += r.bytes;
  }
  return moved;
}

// The weights part on its own request: compact (high halves, rounded up to the alignment) when every float is
// bf16-exact, else whole. The compaction is decided at each write, so weights that train go back to floats.
size_t SsdExpertStore::transfer_weights(int i, float* buf, bool write) {
  const size_t n = sizes_[i].weights, at = record_at_[i];
  const size_t compact = round_up(n * sizeof(uint16_t), kAlign), whole = round_up(n * sizeof(float), kAlign);
  if (!write) {
    move_bytes(i, reinterpret_cast<char*>(buf), at, compact_[i] ? compact : whole, false);
    if (compact_[i]) widen_in_place(buf, n);
    return compact_[i] ? compact : whole;
  }
  if (!bf16_exact(buf, n)) {
    move_bytes(i, reinterpret_cast<char*>(buf), at, whole, true);
    compact_[i] = 0;
    return whole;
  }
  std::unique_ptr<void, decltype(&std::free)> halves(std::aligned_alloc(kAlign, compact), &std::free);
  check(halves != nullptr, "out of host memory for the SSD tier's write of expert " + std::to_string(i));
  std::memset(static_cast<char*>(halves.get()) + n * sizeof(uint16_t), 0, compact - n * sizeof(uint16_t));
  narrow(buf, static_cast<uint16_t*>(halves.get()), n);
  move_bytes(i, static_cast<char*>(halves.get()), at, compact, true);
  compact_[i] = 1;
  return compact;
}

void SsdExpertStore::move_bytes(int i, char* data, size_t file_at, size_t bytes, bool write) {
  const off_t at = static_cast<off_t>(file_at);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = write ? ::pwrite(fd_, data + done, bytes - done, at + static_cast<off_t>(done))
                            : ::pread(fd_, data + done, bytes - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    check(n > 0, path_ + (write ? ": writing" : ": reading") + " expert " + std::to_string(i) + " at byte offset " +
                     std::to_string(at + static_cast<off_t>(done)) + " failed: " +
                     (n == 0 ? std::string("unexpected end of file") : std::strerror(errno)) +
                     (write ? " (is the disk full?)" : ""));
    done += static_cast<size_t>(n);
  }
}

void SsdExpertStore::note_request() {
  if (policy_ != CachePolicy::Lfu || ++requests_ < decay_every_) return;
  requests_ = 0;
  for (Entry& x : entries_) x.hits *= decay_;
}

int SsdExpertStore::find_victim() const {
  int best = -1;
  bool best_qualifies = false;
  for (int e = 0; e < static_cast<int>(entries_.size()); ++e) {
    const Entry& x = entries_[e];
    if (x.state == State::Free) return e;
    if (x.state != State::Ready || x.refs > 0) continue;
    if (best < 0) {
      best = e;
      best_qualifies = x.hits >= threshold_;
      continue;
    }
    const Entry& b = entries_[best];
    if (policy_ == CachePolicy::NextUse && next_use_) {
      const int64_t nx = next_use_(x.expert), nb = next_use_(b.expert);
      if (nx > nb || (nx == nb && x.last_use < b.last_use)) best = e;
      continue;
    }
    if (policy_ == CachePolicy::Lru || policy_ == CachePolicy::NextUse) {
      if (x.last_use < b.last_use) best = e;
      continue;
    }
    const bool qualifies = x.hits >= threshold_;
    if (qualifies != best_qualifies) {
      if (qualifies) best = e, best_qualifies = true;
      continue;
    }
    if (x.hits < b.hits || (x.hits == b.hits && x.last_use < b.last_use)) best = e;
  }
  return best;
}

// Called under the lock with entry e marked busy: moves the parts with the lock released, then counts them.
void SsdExpertStore::transfer_unlocked(std::unique_lock<std::mutex>& lock, int e, unsigned parts, bool write) {
  Entry& x = entries_[e];
  lock.unlock();
  const auto t0 = Clock::now();
  size_t weights = 0;
  const size_t bytes = transfer(x.expert, x.buf, parts, write, &weights);
  const double ms = ms_between(t0, Clock::now());
  lock.lock();
  if (write) stats_.weight_bytes_written += static_cast<int64_t>(weights);
  stats_.io_ms += ms;
  (write ? stats_.bytes_written : stats_.bytes_read) += static_cast<int64_t>(bytes);
  if (!write) stats_.read_ms += ms;
}

// Under the lock: writes entry e's changed parts back; acquirers of its expert wait meanwhile.
void SsdExpertStore::write_back(std::unique_lock<std::mutex>& lock, int e) {
  Entry& x = entries_[e];
  if (x.expert < 0 || !x.dirty) return;
  const State was = x.state;
  x.state = State::Writing;
  const unsigned parts = x.dirty;
  transfer_unlocked(lock, e, parts, true);
  x.dirty &= ~parts;
  x.state = was;
  changed_.notify_all();
}

void SsdExpertStore::fill(std::unique_lock<std::mutex>& lock, int e, unsigned need) {
  Entry& x = entries_[e];
  const unsigned missing = need & ~x.valid;
  if (!missing) return;
  x.state = State::Loading;
  transfer_unlocked(lock, e, missing, false);
  x.valid |= missing;
  x.state = State::Ready;
  changed_.notify_all();
}

// Takes an entry for expert i, writing back what it held, and returns it Ready with nothing valid; -1 when
// `wait` is false and every entry is in use, -2 when another thread cached i meanwhile.
int SsdExpertStore::claim(std::unique_lock<std::mutex>& lock, int i, bool wait) {
  for (;;) {
    if (where_[i] >= 0) return -2;
    const int v = find_victim();
    if (v < 0) {
      if (!wait) return -1;
      changed_.wait(lock);
      continue;
    }
    Entry& x = entries_[v];
    ++x.refs;  // holds the victim while its write-back runs unlocked
    write_back(lock, v);
    --x.refs;
    if (x.refs > 0 || (x.state != State::Ready && x.state != State::Free)) continue;  // taken meanwhile
    if (x.expert >= 0) where_[x.expert] = -1;
    x = Entry{x.buf};
    if (where_[i] >= 0) {
      changed_.notify_all();
      return -2;
    }
    where_[i] = v;
    x.expert = i;
    x.hits = 1;
    x.state = State::Ready;
    return v;
  }
}

ExpertState SsdExpertStore::acquire(int i, unsigned need, unsigned overwrite) {
  if (side_[i]) {  // the side parts are always at hand; only the weights go through the cache
    need &= ~kSideParts;
    overwrite &= ~kSideParts;
    if (!need && !overwrite) return parts(i, nullptr);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  note_request();
  for (;;) {
    int e = where_[i];
    if (e >= 0 && entries_[e].state != State::Ready) {
      changed_.wait(lock);
      continue;
    }
    bool cached = e >= 0;
    if (!cached) {
      e = claim(lock, i, true);
      if (e < 0) continue;
    }
    Entry& x = entries_[e];
    ++x.refs;
    x.valid |= overwrite;
    const bool complete = (need & ~x.valid) == 0;
    fill(lock, e, need);
    if (cached && complete) {
      ++stats_.hits;
      x.hits += 1;
    } else {
      ++stats_.misses;
    }
    if (x.was_prefetched) {
      lead_ms_sum_ += ms_between(x.prefetched, Clock::now());
      ++lead_count_;
      x.was_prefetched = false;
    }
    return parts(i, x.buf);
  }
}

void SsdExpertStore::release(int i, unsigned held, unsigned dirty, unsigned consumed) {
  if (side_[i]) {
    held &= ~kSideParts;
    dirty &= ~kSideParts;
    if (!held) return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& x = entries_[where_[i]];
  --x.refs;
  x.dirty = (x.dirty | dirty) & ~consumed;
  x.last_use = ++clock_;
  changed_.notify_all();
}

void SsdExpertStore::prefetch(int i, unsigned parts) {
  if (side_[i]) parts &= ~kSideParts;
  if (!parts) return;
  io_worker_.submit([this, i, parts] {
    std::unique_lock<std::mutex> lock(mutex_);
    int e = where_[i];
    if (e >= 0 && (entries_[e].state != State::Ready || (parts & ~entries_[e].valid) == 0)) return;
    if (e < 0) e = claim(lock, i, false);
    if (e < 0) return;
    Entry& x = entries_[e];
    ++x.refs;
    fill(lock, e, parts);
    --x.refs;
    if (x.refs == 0 && !x.was_prefetched) {
      x.was_prefetched = true;
      x.prefetched = Clock::now();
    }
    x.last_use = ++clock_;
    changed_.notify_all();
  });
}

void SsdExpertStore::flush() {
  io_worker_.drain();
  std::unique_lock<std::mutex> lock(mutex_);
  for (int e = 0; e < static_cast<int>(entries_.size()); ++e) {
    check(entries_[e].refs == 0, "ssd tier: flush while expert " + std::to_string(entries_[e].expert) + " is in use");
    write_back(lock, e);
  }
}

void SsdExpertStore::store(int i, const ExpertState& from) {
  const ExpertState s = acquire(i, 0, kAllParts);
  copy_parts(sizes_[i], s, from);
  release(i, kAllParts, kAllParts, 0);
}

void SsdExpertStore::load(int i, const ExpertState& to) {
  const ExpertState s = acquire(i, kAllParts);
  copy_parts(sizes_[i], to, s);
  release(i, kAllParts, 0, 0);
}

ExpertStoreStats SsdExpertStore::take_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  ExpertStoreStats s = stats_;
  s.prefetch_lead_ms = lead_count_ ? lead_ms_sum_ / static_cast<double>(lead_count_) : 0.0;
  s.peak_host_bytes = static_cast<int64_t>(host_.peak());
  s.ssd_bytes = static_cast<int64_t>(ssd_.current());
  stats_ = ExpertStoreStats{};
  lead_ms_sum_ = 0;
  lead_count_ = 0;
  return s;
}

}  // namespace moe
