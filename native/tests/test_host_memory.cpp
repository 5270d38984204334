// core/host_slabs: medium blocks carved from large huge-page slabs, returned a slab at a time.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/host_slabs.h"
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

TEST_MAIN()
