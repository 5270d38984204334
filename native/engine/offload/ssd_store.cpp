#include "offload/ssd_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace moe {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlign = 4096;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

SsdExpertStore::SsdExpertStore(const std::string& dir, const std::vector<size_t>& sizes, int entries,
                               const OffloadConfig& cfg, MemoryTier& host, MemoryTier& ssd)
    : dir_(dir),
      sizes_(sizes),
      policy_(cfg.cache_policy),
      threshold_(cfg.lfu_threshold),
      decay_(cfg.lfu_decay),
      decay_every_(cfg.lfu_decay_every),
      host_(host),
      ssd_(ssd),
      where_(sizes.size(), -1) {
  check(entries >= 4, "offload.cache_experts: the SSD tier's host cache needs at least 4 entries (the copy, "
                      "optimizer and prefetch workers and the compute thread each hold one), got " +
                          std::to_string(entries));
  part_bytes_ = record_bytes(sizes_) / 4;
  std::error_code ec;
  made_dir_ = std::filesystem::create_directories(dir_, ec);
  check(!ec, "offload.ssd_dir: cannot create " + dir_ + ": " + ec.message());
  path_ = (std::filesystem::path(dir_) / "experts.bin").string();
  // Direct I/O keeps the page cache out of the measurement and of host memory; some file systems
  // (tmpfs) refuse it, and then the file is read through the page cache.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  check(fd_ >= 0, "offload.ssd_dir: cannot create " + path_ + ": " + std::strerror(errno));
  const size_t file_bytes = sizes_.size() * 4 * part_bytes_;
  ssd_.charge(file_bytes, "every expert's weights, gradient and AdamW moments");
  check(::ftruncate(fd_, static_cast<off_t>(file_bytes)) == 0,
        path_ + ": cannot size the expert file to " + std::to_string(file_bytes) + " bytes: " + std::strerror(errno));
  entries = std::min<int>(entries, static_cast<int>(sizes_.size()));
  entries_.resize(entries);
  for (int e = 0; e < entries; ++e) {
    host_.charge(4 * part_bytes_, "host cache entry " + std::to_string(e) + " (an expert's state)");
    entries_[e].buf = static_cast<float*>(std::aligned_alloc(kAlign, 4 * part_bytes_));
    check(entries_[e].buf != nullptr, "out of host memory for the SSD tier's cache");
  }
}

SsdExpertStore::~SsdExpertStore() {
  io_worker_.drain();
  for (Entry& x : entries_) {
    std::free(x.buf);
    host_.uncharge(4 * part_bytes_);
  }
  ssd_.uncharge(sizes_.size() * 4 * part_bytes_);
  if (fd_ >= 0) ::close(fd_);
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  if (made_dir_) std::filesystem::remove(dir_, ec);
}

size_t SsdExpertStore::record_bytes(const std::vector<size_t>& sizes) {
  size_t largest = 0;
  for (size_t n : sizes) largest = std::max(largest, n);
  return 4 * round_up(largest * sizeof(float), kAlign);
}

ExpertState SsdExpertStore::parts(float* buf) const {
  const size_t stride = part_bytes_ / sizeof(float);
  return {buf, buf + stride, buf + 2 * stride, buf + 3 * stride};
}

size_t SsdExpertStore::transfer(int i, float* buf, unsigned parts, bool write) {
  size_t moved = 0;
  for (int p = 0; p < 4;) {
    if (!(parts & (1u << p))) {
      ++p;
      continue;
    }
    int q = p;
    while (q < 4 && (parts & (1u << q))) ++q;
    const size_t bytes = (q - p) * part_bytes_;
    const off_t at = static_cast<off_t>((static_cast<size_t>(i) * 4 + p) * part_bytes_);
    char* data = reinterpret_cast<char*>(buf) + p * part_bytes_;
    for (size_t done = 0; done < bytes;) {
      const ssize_t n = write ? ::pwrite(fd_, data + done, bytes - done, at + static_cast<off_t>(done))
                              : ::pread(fd_, data + done, bytes - done, at + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      check(n > 0, path_ + (write ? ": writing" : ": reading") + " expert " + std::to_string(i) +
                       " at byte offset " + std::to_string(at + static_cast<off_t>(done)) + " failed: " +
                       (n == 0 ? std::string("unexpected end of file") : std::strerror(errno)) +
                       (write ? " (is the disk full?)" : ""));
      done += static_cast<size_t>(n);
    }
    moved += bytes;
    p = q;
  }
  return moved;
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
  const size_t bytes = transfer(x.expert, x.buf, parts, write);
  const double ms = ms_between(t0, Clock::now());
  lock.lock();
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
    return parts(x.buf);
  }
}

void SsdExpertStore::release(int i, unsigned dirty, unsigned consumed) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& x = entries_[where_[i]];
  --x.refs;
  x.dirty = (x.dirty | dirty) & ~consumed;
  x.last_use = ++clock_;
  changed_.notify_all();
}

void SsdExpertStore::prefetch(int i, unsigned parts) {
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

void SsdExpertStore::store(int i, const float* w, const float* g, const float* m, const float* v) {
  const ExpertState s = acquire(i, 0, kAllParts);
  const size_t bytes = sizes_[i] * sizeof(float);
  std::memcpy(s.w, w, bytes);
  std::memcpy(s.g, g, bytes);
  std::memcpy(s.m, m, bytes);
  std::memcpy(s.v, v, bytes);
  release(i, kAllParts);
}

void SsdExpertStore::load(int i, float* w, float* g, float* m, float* v) {
  const ExpertState s = acquire(i, kAllParts);
  const size_t bytes = sizes_[i] * sizeof(float);
  std::memcpy(w, s.w, bytes);
  std::memcpy(g, s.g, bytes);
  std::memcpy(m, s.m, bytes);
  std::memcpy(v, s.v, bytes);
  release(i, 0);
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
