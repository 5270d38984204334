// The CPU backend's packed bf16 weights: inside the regions a caller keeps (Backend::keep_bf16_weights, a model's
// bf16 weight copies), each weight the linear layers read is packed for sgemm_bf16 (sgemm_bf16_pack_b) at its first
// use after a change and reused by every later call until the next one, for the two products that read it:
// x·wᵀ (the forward) and dy·w (the backward's dx). That saves the packing every call would otherwise repeat on
// the same bytes (a weight changes at most once per optimizer step; a frozen one never). Each packed form takes
// about as many bytes as the bf16 copy.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "core/host_slabs.h"
#include "core/threadpool.h"

namespace moe::cpu {

class PackedBf16Weights {
 public:
  PackedBf16Weights() = default;
  PackedBf16Weights(const PackedBf16Weights&) = delete;
  PackedBf16Weights& operator=(const PackedBf16Weights&) = delete;

  void keep(const uint16_t* begin, const uint16_t* end);
  // Every packed weight overlapping [begin, end) is repacked at its next use.
  void changed(const uint16_t* begin, const uint16_t* end);
  // Drops the region and every packed weight overlapping it.
  void forget(const uint16_t* begin, const uint16_t* end);
  // The forward's form of the weight w [O, I] (inside a kept region; false if not) packed from its fp32 values, the
  // words its bf16 copy would give, with the copy at w never written: from now on packing from w's bytes (another
  // shape or product, a change) is an error rather than a product on zeros. forget() lifts it.
  bool lay_out(ThreadPool& tp, const uint16_t* w, const float* fp32, int I, int O);

  // The packed op(B) of the weight w [O, I] (forward: wᵀ, N = O, K = I; else w, N = I, K = O), packed now if it is
  // stale; null when w lies outside every kept region.
  const uint32_t* get(ThreadPool& tp, const uint16_t* w, int I, int O, bool forward);

  // Packs the forward's form of the weight w [O, I] now if stale, and the backward's with `backward`. A weight the
  // GEMMs already read as another shape (part of a tensor, as latent attention's kv_a) is packed as they read it.
  void prepare(ThreadPool& tp, const uint16_t* w, int I, int O, bool backward);

  int64_t bytes() const;

 private:
  struct Entry {
    int I = 0, O = 0;
    bool fresh = false;
    uint32_t* words = nullptr;
  };
  // Addresses as integers, ordered: a model keeps a region per run of frozen tensors and an entry per weight and
  // product (tens of thousands on a large MoE), and every GEMM call looks one up, so lookups are by range.
  using Addr = std::uintptr_t;
  using Key = std::pair<Addr, bool>;  // (weight's first byte, forward)
  void drop_overlapping(Addr begin, Addr end, bool erase);

  mutable std::mutex mu_;
  HostSlabs slabs_;  // the packed words: on huge pages, which the kernels stream them from at twice the speed
  std::map<Addr, Addr> regions_;  // begin -> end, disjoint
  std::map<Addr, Addr> sealed_;   // begin -> end, disjoint
  bool sealed(Addr begin, Addr end) const;
  std::map<Key, Entry> entries_;
  Addr max_span_ = 0;  // the largest weight's bytes: no entry starting further before a range reaches into it
  int64_t bytes_ = 0;
};

}  // namespace moe::cpu
