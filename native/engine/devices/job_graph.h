// A device's work for one pass as a graph of jobs on its three streams (pipelining): compute, comm
// (tokens and weights between devices) and mem (activations to and from the host). Jobs on one stream run in
// the order they were added; a job also waits for its dependencies on other streams. On the CPU backend a
// stream is a worker thread, so the overlap is real; each job's time is its worker's CPU time, which is what the
// job costs a device of its own even while the virtual devices share this machine's cores.
//
// makespan() replays the measured times through the same order and dependencies: the time this device takes
// for the pass with its streams overlapping.
#pragma once
#include <array>
#include <exception>
#include <mutex>
#include <functional>
#include <vector>

#include "offload/serial_worker.h"

namespace moe {

enum class Stream { Compute = 0, Comm = 1, Mem = 2 };
constexpr int kStreams = 3;

using StreamWorkers = std::array<SerialWorker*, kStreams>;

class JobGraph {
 public:
  // deps: indices returned by earlier add() calls; work: the job's FLOP (compute) or bytes (comm, mem), for the
  // streams' measured speeds. Returns this job's index.
  int add(Stream stream, double work, std::function<void()> run, std::vector<int> deps = {});
  // Submits every job to its stream's worker; finish() waits for all and rethrows the first job's exception.
  // A job's time is its worker thread's CPU time when the device computes on that thread alone (thread_time),
  // else wall time. The graph must outlive finish().
  void start(const StreamWorkers& workers, bool thread_time);
  void finish();

  size_t size() const { return jobs_.size(); }
  double ms(int job) const { return jobs_[job].ms; }
  void set_ms(int job, double ms) { jobs_[job].ms = ms; }  // for tests of makespan()
  double busy_ms(Stream s) const;
  double work(Stream s) const;
  double busy_ms() const;
  double makespan() const;

 private:
  struct Job {
    Stream stream;
    std::function<void()> run;
    std::vector<int> deps;
    double work = 0, ms = 0;
  };
  std::vector<Job> jobs_;
  StreamWorkers workers_{};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace moe
