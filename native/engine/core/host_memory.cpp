#include "core/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace moe {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(4) << 20;

// Large blocks are mappings of their own: their pages are zero until first touched and go back to the OS when
// freed. The map keeps each one's length, by its start, for munmap and for finding the block a range lies in.
struct Mapping {
  size_t bytes;
  bool sparse;  // pages have been handed back: no longer advised for huge pages
};

struct Mappings {
  std::mutex mutex;
  std::map<uintptr_t, Mapping> blocks;
};

Mappings& mappings() {
  static Mappings* m = new Mappings;  // never destroyed: blocks may be freed from static destructors
  return *m;
}

void* map_aligned(size_t rounded) {
  void* raw = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t tail = aligned + rounded, end = begin + rounded + kHugePage;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: where huge pages are off or exhausted the block keeps normal pages.
  madvise(p, rounded, MADV_HUGEPAGE);
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.blocks[aligned] = {rounded, false};
  return p;
}

// A block that hands pages back is used sparsely from then on (an arena whose experts come and go), so it gives up
// its huge-page advice: else the kernel backs each 2 MiB region that still holds one written page with a whole
// huge page again, at a fault or later in its background collapsing, and the handed-back pages cost memory anew.
// Huge pages already in place stay.
void mark_sparse(uintptr_t begin) {
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.blocks.upper_bound(begin);
  if (it == m.blocks.begin()) return;
  --it;
  if (begin >= it->first + it->second.bytes || it->second.sparse) return;
  it->second.sparse = true;
  ::madvise(reinterpret_cast<void*>(it->first), it->second.bytes, MADV_NOHUGEPAGE);
}

}  // namespace

void* host_alloc(size_t bytes) {
  if (bytes < kHugeFrom) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return map_aligned((bytes + kHugePage - 1) / kHugePage * kHugePage);
}

void* host_alloc_zeroed(size_t bytes) {
  void* p = host_alloc(bytes);
  if (p && bytes < kHugeFrom) std::memset(p, 0, bytes);
  return p;
}

void host_free(void* ptr) {
  if (!ptr) return;
  Mappings& m = mappings();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != m.blocks.end()) {
      munmap(ptr, it->second.bytes);
      m.blocks.erase(it);
      return;
    }
  }
  std::free(ptr);
}

void host_release(void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t inner_begin = (begin + page - 1) / page * page, inner_end = end / page * page;
  if (inner_end <= inner_begin) {
    std::memset(p, 0, bytes);
    return;
  }
  mark_sparse(begin);
  std::memset(p, 0, inner_begin - begin);
  std::memset(reinterpret_cast<void*>(inner_end), 0, end - inner_end);
  ::madvise(reinterpret_cast<void*>(inner_begin), inner_end - inner_begin, MADV_DONTNEED);
}

}  // namespace moe
