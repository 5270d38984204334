#include "core/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace moe {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(4) << 20;

}  // namespace

void* host_alloc(size_t bytes) {
  if (bytes < kHugeFrom) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  // Advice only: where huge pages are off or exhausted the block keeps normal pages.
  if (p) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void host_free(void* ptr) { std::free(ptr); }

}  // namespace moe
