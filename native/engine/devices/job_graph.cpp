#include "devices/job_graph.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "core/error.h"

namespace moe {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int JobGraph::add(Stream stream, double work, std::function<void()> run, std::vector<int> deps) {
  for (int d : deps) check(d >= 0 && d < (int)jobs_.size(), "job graph: a dependency must be an earlier job");
  jobs_.push_back({stream, std::move(run), std::move(deps), work, 0});
  return int(jobs_.size()) - 1;
}

void JobGraph::start(const StreamWorkers& workers, bool thread_time) {
  workers_ = workers;
  const auto now_ms = thread_time ? thread_cpu_ms : wall_ms;
  std::vector<uint64_t> ticket(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) {
    Job& job = jobs_[i];
    std::vector<std::pair<SerialWorker*, uint64_t>> waits;
    for (int d : job.deps)
      if (jobs_[d].stream != job.stream) waits.emplace_back(workers[int(jobs_[d].stream)], ticket[d]);
    ticket[i] = workers[int(job.stream)]->submit([this, &job, waits = std::move(waits), now_ms] {
      for (auto [worker, t] : waits) worker->wait(t);
      {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (error_) return;  // an earlier job failed: the pass is abandoned
      }
      const double t0 = now_ms();
      try {
        job.run();
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      job.ms = now_ms() - t0;
    });
  }
}

void JobGraph::finish() {
  for (SerialWorker* w : workers_)
    if (w) w->drain();
  if (error_) std::rethrow_exception(error_);
}

double JobGraph::work(Stream s) const {
  double total = 0;
  for (const Job& j : jobs_)
    if (j.stream == s) total += j.work;
  return total;
}

double JobGraph::busy_ms(Stream s) const {
  double total = 0;
  for (const Job& j : jobs_)
    if (j.stream == s) total += j.ms;
  return total;
}

double JobGraph::busy_ms() const {
  double total = 0;
  for (const Job& j : jobs_) total += j.ms;
  return total;
}

double JobGraph::makespan() const {
  std::array<double, kStreams> free_at{};
  std::vector<double> finish(jobs_.size());
  double end = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    double start = free_at[int(j.stream)];
    for (int d : j.deps) start = std::max(start, finish[d]);
    finish[i] = start + j.ms;
    free_at[int(j.stream)] = finish[i];
    end = std::max(end, finish[i]);
  }
  return end;
}

}  // namespace moe
