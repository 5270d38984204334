#include "backend/cpu/laid_out_weights.h"

#include "backend/cpu/gemm.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

std::uintptr_t address(const float* p) { return reinterpret_cast<std::uintptr_t>(p); }
std::string shape(int I, int O) {
  std::string s = "[";  // appended, not "[" + ...: GCC 12 warns falsely on that (-Wrestrict)
  s += std::to_string(O);
  s += ", ";
  s += std::to_string(I);
  return s + "]";
}

}  // namespace

void LaidOutWeights::lay_out(ThreadPool& tp, const float* w, const float* values, int I, int O) {
  check(I > 0 && O > 0, "fp32 weight layout: empty weight " + shape(I, O));
  const std::lock_guard<std::mutex> lock(mu_);
  check(isa_.empty() || isa_ == sgemm_isa(), std::string("fp32 weight layout: laid out for ") + isa_ +
                                                 " kernels, now asked under " + sgemm_isa());
  check(!entries_.count(address(w)), "fp32 weight layout: the weight at this address is laid out already");
  const size_t floats = sgemm_pack_bt_floats(O, I);
  auto* data = static_cast<float*>(slabs_.alloc(floats * sizeof(float)));
  if (!data) fail("fp32 weight layout: out of memory allocating " + std::to_string(floats * sizeof(float)) + " bytes");
  sgemm_pack_bt(tp, values, I, O, I, data);
  entries_[address(w)] = {I, O, data};
  isa_ = sgemm_isa();
  bytes_ += static_cast<int64_t>(floats * sizeof(float));
  empty_.store(false, std::memory_order_release);
}

const float* LaidOutWeights::get(const float* w, int I, int O) const {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(address(w));
  if (it == entries_.end()) return nullptr;
  check(it->second.I == I && it->second.O == O, "fp32 weight layout: the weight laid out as " +
                                                    shape(it->second.I, it->second.O) + " is read as " + shape(I, O));
  check(isa_ == sgemm_isa(), "fp32 weight layout: laid out for " + isa_ + " kernels, read under " + sgemm_isa());
  return it->second.data;
}

void LaidOutWeights::check_unlaid(const float* w, int64_t floats, const char* op) const {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.lower_bound(address(w));
  check(it == entries_.end() || it->first >= address(w + floats),
        std::string(op) + ": reads a weight laid out for answering, whose fp32 values were handed back (a model "
                          "that only answers runs its forward alone)");
}

int64_t LaidOutWeights::bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace moe::cpu
