// Many medium host blocks (a few MiB each) carved out of large ones, so that they live on transparent huge pages
// too: host_alloc gives huge pages only to blocks of 4 MiB or more, and rounding each medium block up to 2 MiB
// would waste up to half of it. A block reads at the speed of the large ones (a packed bf16 weight read straight by
// the GEMM kernel streamed at half speed from normal pages). Space is bump-allocated and returned a slab at a time,
// when every block in it has been freed: meant for blocks that are freed together, as a model's are.
// Not thread-safe; the owner serialises calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>

namespace moe {

class HostSlabs {
 public:
  explicit HostSlabs(size_t slab_bytes = size_t(64) << 20) : slab_bytes_(slab_bytes) {}
  ~HostSlabs();
  HostSlabs(const HostSlabs&) = delete;
  HostSlabs& operator=(const HostSlabs&) = delete;

  // 64-byte aligned; null when memory is exhausted (or bytes == 0).
  void* alloc(size_t bytes);
  void free(void* p);
  // Bytes held from the system (whole slabs).
  size_t reserved() const { return reserved_; }

 private:
  struct Slab {
    size_t bytes = 0, used = 0;
    int64_t live = 0;
  };
  size_t slab_bytes_;
  size_t reserved_ = 0;
  std::map<std::uintptr_t, Slab> slabs_;  // by first byte
  std::uintptr_t open_ = 0;               // the slab new blocks come from (0: none)
};

}  // namespace moe
