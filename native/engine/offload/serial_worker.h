// One thread running jobs in submission order: the CPU backend's stand-in for a copy stream (uploads and
// downloads), and the queue of the expert-wise host optimizer. FIFO order is what makes an upload into a slot
// safe right after that slot's download was queued.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace moe {

class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Returns the job's ticket; tickets increase by one per job.
  uint64_t submit(std::function<void()> job);
  void wait(uint64_t ticket);
  void drain();
  bool done(uint64_t ticket);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<std::function<void()>> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace moe
