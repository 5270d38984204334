#pragma once
#include <cstddef>

#include "core/threadpool.h"

namespace moe::cpu {

// Zeroes [ptr, ptr + bytes). Large blocks (the gradients, every step) are cleared by every thread with streaming
// stores: a cache line written whole needs no read of its old contents, which a plain store fetches first
// (measured 1.4-1.8x the zeroing rate of memset on 1 GiB, 2 threads, Zen 5). Small blocks stay a memset, leaving
// them in cache for the op that writes them next.
void clear(ThreadPool& tp, void* ptr, size_t bytes);

}  // namespace moe::cpu
