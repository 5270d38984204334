#include "core/threadpool.h"

#include <sched.h>

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MOE_CPU_RELAX() _mm_pause()
#else
#define MOE_CPU_RELAX() std::this_thread::yield()
#endif

namespace moe {
namespace {

// About 50 µs of polling before a thread blocks: long enough to bridge the gap between two
// parallel regions of one op sequence, short enough not to burn a core while idle.
constexpr int kSpinIterations = 4000;

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) : n_threads_(std::max(1, threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations && !stopping_.load(std::memory_order_relaxed); ++spin) {
      MOE_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    seen = gen;
    // Every worker takes part in every region (idle chunks return at once), so the caller waits for
    // all of them and no worker can still be inside region g when region g+1 is published.
    (*job_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int i = 0; i < n_threads_; ++i) fn(i);
    return;
  }
  struct Release {
    std::atomic<bool>& busy;
    ~Release() { busy.store(false, std::memory_order_release); }
  } release{busy_};
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Bumped under the mutex so a worker between its predicate check and its wait cannot miss it.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0 && spin < kSpinIterations; ++spin)
    MOE_CPU_RELAX();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = std::min<int64_t>(n_threads_, (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  run_on_all([&](int index) {
    if (index >= chunks) return;
    const int64_t begin = n * index / chunks, end = n * (index + 1) / chunks;
    if (begin < end) fn(begin, end, index);
  });
}

}  // namespace moe
