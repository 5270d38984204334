#include "backend/cpu/clear.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace moe::cpu {

namespace {

constexpr size_t kChunk = size_t(1) << 20;
constexpr size_t kParallelFrom = 8 * kChunk;  // below this, one memset on the calling thread

// From this size on, streaming stores: a block larger than the last-level cache a core shares with the others (32
// MiB on a Zen 4/5 CCD; sysconf reports a whole socket's on some VMs) cannot stay in it whole until it is next
// read, while a smaller one (an activation gradient about to be accumulated into) may.
constexpr size_t kStreamFrom = 64 * kChunk;

// Zeroes [p, p + n) with non-temporal stores between its first and last whole 64-byte lines.
void stream_zero(char* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const size_t head = std::min(n, static_cast<size_t>((64 - a % 64) % 64));
  std::memset(p, 0, head);
  char* q = p + head;
  const size_t lines = (n - head) / 64;
  const __m128i z = _mm_setzero_si128();
  for (size_t i = 0; i < lines; ++i, q += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(q), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(q + 16), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(q + 32), z);
    _mm_stream_si128(reinterpret_cast<__m128i*>(q + 48), z);
  }
  std::memset(q, 0, p + n - q);
  // Streaming stores are weakly ordered: they must be visible before the pool reports this part done.
  _mm_sfence();
}

}  // namespace

void clear(ThreadPool& tp, void* ptr, size_t bytes) {
  if (bytes < kParallelFrom) return void(std::memset(ptr, 0, bytes));
  char* p = static_cast<char*>(ptr);
  const bool stream = bytes >= kStreamFrom;
  tp.parallel_for(static_cast<int64_t>((bytes + kChunk - 1) / kChunk), [=](int64_t c0, int64_t c1, int) {
    const size_t b0 = c0 * kChunk, b1 = std::min(bytes, c1 * kChunk);
    if (stream) stream_zero(p + b0, b1 - b0);
    else std::memset(p + b0, 0, b1 - b0);
  });
}

}  // namespace moe::cpu
