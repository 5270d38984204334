// core/host_memory and core/host_slabs: large blocks as mappings of their own; medium blocks carved from large
// huge-page slabs, returned a slab at a time.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/host_memory.h"
#include "core/host_slabs.h"
#include "huge_pages.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;
using moe_test::expect_error;

namespace {

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

TEST(slab_blocks_are_aligned_disjoint_and_writable) {
  HostSlabs slabs(size_t(1) << 20);
  std::vector<std::pair<char*, size_t>> blocks;
  for (size_t bytes : {size_t(100), size_t(3000), size_t(1) << 18, size_t(1) << 19, size_t(7), size_t(1) << 18}) {
    char* p = static_cast<char*>(slabs.alloc(bytes));
    CHECK(p != nullptr);
    CHECK(addr(p) % 64 == 0);
    std::memset(p, static_cast<int>(blocks.size()), bytes);
    blocks.push_back({p, bytes});
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = 0; j < blocks.size(); ++j)
      if (i != j)
        CHECK(addr(blocks[i].first) + blocks[i].second <= addr(blocks[j].first) ||
              addr(blocks[j].first) + blocks[j].second <= addr(blocks[i].first));
    for (size_t k = 0; k < blocks[i].second; ++k) CHECK(blocks[i].first[k] == static_cast<char>(i));
  }
  // 1.9 MiB asked in 1 MiB slabs: two slabs.
  CHECK(slabs.reserved() == size_t(2) << 20);
  for (auto [p, bytes] : blocks) slabs.free(p);
  CHECK(slabs.reserved() == size_t(1) << 20);  // the open slab stays for reuse, emptied
  CHECK(slabs.alloc(0) == nullptr);
}

TEST(slab_returns_only_when_every_block_in_it_is_freed) {
  HostSlabs slabs(size_t(1) << 20);
  void* a = slabs.alloc(size_t(600) << 10);
  void* b = slabs.alloc(size_t(600) << 10);  // does not fit beside a: a second slab, now the open one
  void* c = slabs.alloc(size_t(100) << 10);  // beside b
  CHECK(slabs.reserved() == size_t(2) << 20);
  slabs.free(b);
  CHECK(slabs.reserved() == size_t(2) << 20);  // c still lives in b's slab
  slabs.free(a);
  CHECK(slabs.reserved() == size_t(1) << 20);  // a's slab was closed and is empty: returned
  void* big = slabs.alloc(size_t(3) << 20);     // larger than a slab: a slab of its own
  CHECK(big != nullptr);
  CHECK(slabs.reserved() == size_t(4) << 20);
  void* d = slabs.alloc(64);  // still from the open slab, beside c
  CHECK(addr(d) > addr(c) && addr(d) < addr(c) + (size_t(1) << 20));
  slabs.free(big);
  CHECK(slabs.reserved() == size_t(1) << 20);
  slabs.free(c);
  slabs.free(d);
}

TEST(slab_free_of_a_foreign_pointer_is_an_error) {
  HostSlabs slabs(size_t(1) << 20);
  void* a = slabs.alloc(256);
  int local = 0;
  expect_error([&] { slabs.free(&local); }, {"not from these slabs"}, "stack pointer");
  expect_error([&] { slabs.free(static_cast<char*>(a) + 4096); }, {"not from these slabs"}, "past the used part");
  slabs.free(a);
}

// Pages of [p, p + bytes) resident in memory.
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(p, bytes, in.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// A large zeroed block costs no memory until written (an arena whose experts live elsewhere), and goes back to
// the OS when freed; a small one is zeroed in place.
TEST(large_zeroed_blocks_are_untouched_until_written) {
  const size_t bytes = size_t(64) << 20;
  char* p = static_cast<char*>(host_alloc_zeroed(bytes));
  CHECK(p != nullptr && addr(p) % (size_t(2) << 20) == 0);
  CHECK(resident_pages(p, bytes) == 0);
  p[bytes / 2] = 1;
  const size_t touched = resident_pages(p, bytes);
  CHECK_MSG(touched >= 1 && touched <= 512, std::to_string(touched));  // one page, or one huge page
  bool zero = true;
  for (size_t i = 0; i < bytes; i += 4096) zero = zero && p[i] == (i == bytes / 2 ? 1 : 0);
  CHECK(zero);
  host_free(p);
  char* small = static_cast<char*>(host_alloc(1000));
  std::memset(small, 7, 1000);
  host_free(small);
  char* z = static_cast<char*>(host_alloc_zeroed(1000));
  bool small_zero = true;
  for (int i = 0; i < 1000; ++i) small_zero = small_zero && z[i] == 0;
  CHECK(small_zero);
  host_free(z);
}

// Pages handed back stay handed back: the kernel's background collapsing into huge pages (here asked for at once)
// would otherwise back every 2 MiB region that kept one page with a whole huge page, the handed-back rest included,
// and an SSD-offloaded run's arenas would grow back to the whole model.
TEST(released_pages_are_not_refilled_by_huge_page_collapse) {
  const size_t huge = size_t(2) << 20, page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes = 8 * huge;
  char* p = static_cast<char*>(host_alloc(bytes));
  CHECK(p != nullptr);
  std::memset(p, 1, bytes);
  // Each region keeps its first page, as an expert's neighbour in an arena keeps its own.
  for (size_t r = 0; r < bytes; r += huge) host_release(p + r + page, huge - page);
  const size_t kept = resident_pages(p, bytes);
  CHECK_MSG(kept <= 8 * 2, std::to_string(kept));
  moe_test::collapse_huge_pages(p, bytes);
  const size_t after = resident_pages(p, bytes);
  CHECK_MSG(after == kept, std::to_string(kept) + " pages resident, " + std::to_string(after) + " after collapsing");
  bool zero = true;
  for (size_t r = 0; r < bytes; r += huge)
    for (size_t i = page; i < huge; i += page) zero = zero && p[r + i] == 0;
  CHECK(zero);
  host_free(p);
}

TEST_MAIN()
