// Host memory for the CPU backend and its benchmarks. Blocks of 4 MiB or more are 2 MiB aligned and asked for
// transparent huge pages (Linux's default "madvise" mode gives them only when asked): the streaming kernels
// (AdamW, the GEMMs' packing, large copies) otherwise spend much of their time on TLB misses, and how much
// depended on where the pages happened to land.
#pragma once
#include <cstddef>

namespace moe {

// 64-byte aligned (2 MiB for large blocks); null only when bytes == 0 or memory is exhausted.
void* host_alloc(size_t bytes);
// The same, all zero. A large block's pages are untouched (the OS's zero pages) until written, so a block that is
// mostly never written (an arena whose experts live in another tier) costs no memory for those parts.
void* host_alloc_zeroed(size_t bytes);
void host_free(void* ptr);
// Hands the whole pages inside [p, p + bytes) of a block back to the OS and zeroes the partial pages at its ends
// (which the block's neighbouring contents share): the range reads as zeros afterwards and costs no memory until
// written again. A large block that has pages handed back gives up its huge-page advice, so that they stay handed
// back (see host_memory.cpp).
void host_release(void* p, size_t bytes);

}  // namespace moe
