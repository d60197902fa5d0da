#include "util/large_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kvserve {

void* AllocateLarge(size_t bytes) {
  if (bytes < kHugePageBytes)
    return std::aligned_alloc(64, bytes == 0 ? 64 : (bytes + 63) / 64 * 64);
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* memory = std::aligned_alloc(kHugePageBytes, rounded);
  // Advice only: a kernel without transparent huge pages refuses it and the pages stay 4 KiB.
  if (memory != nullptr) ::madvise(memory, rounded, MADV_HUGEPAGE);
  return memory;
}

void FreeLarge(void* memory) { std::free(memory); }

}  // namespace kvserve
