// A persistent worker pool with static, deterministic partitioning.
// parallel_for splits [0, n) into at most `threads()` contiguous chunks; the caller runs chunk 0.
// Ops must never let the partition change *what* is computed (reductions are either
// per-output-element or over fixed-size chunks combined in order), so results are
// bit-identical whatever the thread count.
// Workers spin briefly before sleeping: a training step issues hundreds of short parallel
// regions back to back, and a futex wake-up per region would cost more than many of them.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moe {

// The CPUs this process may run on (its affinity mask, which a container or taskset narrows; else the machine's).
// More pool threads than that take turns on them, and each parallel region waits for the last one scheduled.
int usable_cpus();

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return n_threads_; }

  // fn(begin, end, worker_index); chunks smaller than `grain` are not split further.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain = 1);

  // Runs fn(worker_index) once on every worker (index 0 is the caller). A call made while the pool is busy (from
  // another thread, or from inside a region) runs every index on the calling thread instead.
  void run_on_all(const std::function<void(int)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* job_ = nullptr;  // published before generation_ is bumped
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> busy_{false};
};

}  // namespace moe
