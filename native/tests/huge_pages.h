// Asks the kernel to collapse a range into transparent huge pages at once (MADV_COLLAPSE, Linux 6.1+), as its
// background collapsing would in time: tests use it to check that pages handed back stay handed back whenever that
// runs. Refused (harmlessly) by older kernels and for ranges advised against huge pages.
#pragma once
#include <sys/mman.h>

#include <cstddef>

namespace moe_test {

inline void collapse_huge_pages(void* p, size_t bytes) {
  constexpr int kMadvCollapse = 25;  // MADV_COLLAPSE; older C libraries lack the name
  ::madvise(p, bytes, kMadvCollapse);
}

}  // namespace moe_test
