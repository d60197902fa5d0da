// util/large_memory.h: 2 MiB alignment and the huge-page advice for large allocations, 64-byte
// alignment for small ones, and the zeroed KV buffers HostAllocator builds on it.
#include "util/large_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "util/buffer.h"

namespace kvserve {
namespace {

// The VmFlags line of the /proc/self/smaps mapping that holds `p` ("" if none does).
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(LargeMemoryTest, LargeAllocationsAreHugePageAlignedAndAdvised) {
  const size_t bytes = 5 * kHugePageBytes + 123;
  auto* p = static_cast<uint8_t*>(AllocateLarge(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  std::memset(p, 0x5a, bytes);
  EXPECT_EQ(p[bytes - 1], 0x5a);
  // madvise(MADV_HUGEPAGE) marks the mapping "hg" whatever the kernel then has to give.
  const std::string flags = VmFlagsOf(p);
  ASSERT_FALSE(flags.empty()) << "no smaps entry holds the allocation";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  FreeLarge(p);
}

TEST(LargeMemoryTest, SmallAllocationsAreCacheLineAligned) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{100000}}) {
    void* p = AllocateLarge(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    FreeLarge(p);
  }
}

TEST(LargeMemoryTest, HostBuffersAreZeroedLargeOrSmall) {
  HostAllocator allocator;
  for (size_t bytes : {size_t{10}, 3 * kHugePageBytes + 7}) {
    Buffer buffer = allocator.AllocateZeroed(bytes);
    ASSERT_EQ(buffer.size(), bytes);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; ++i) nonzero += buffer.data()[i] != 0;
    EXPECT_EQ(nonzero, 0u) << bytes;
    std::memset(buffer.data(), 0xff, bytes);
  }
}

}  // namespace
}  // namespace kvserve
