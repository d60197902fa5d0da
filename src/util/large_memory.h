// Memory for large, long-lived arrays that kernels stream through (packed weights, KV pools).
//
// An allocation of 2 MiB or more is 2 MiB aligned, rounded up to a whole number of 2 MiB pages, and
// marked for transparent huge pages (madvise; the kernel's default mode on Debian is "madvise", so
// without the mark every allocation gets 4 KiB pages). A stream over it then crosses a page
// boundary, where the hardware prefetcher stops and the TLB walks, every 2 MiB instead of every
// 4 KiB. Where huge pages are off or unavailable the memory is ordinary memory. Smaller allocations
// are 64-byte aligned. Either way the bytes are uninitialized and FreeLarge releases them.
#pragma once

#include <cstddef>

namespace kvserve {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// nullptr when the memory is not there.
void* AllocateLarge(size_t bytes);
void FreeLarge(void* memory);

}  // namespace kvserve
