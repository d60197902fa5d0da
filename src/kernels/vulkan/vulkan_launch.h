// How a dispatch of the Vulkan backend is shaped and its push constants written: workgroup counts
// within Vulkan's 65535 per dimension, and push constants as 32-bit words (floats by their bits).
// Shared by the backend's operations (vulkan_backend.cc, vulkan_attention.cc).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace kvserve {

// Workgroups (x, y) covering `groups` groups: a shader numbers its group y * x_count + x and
// leaves when that is past its count (whole groups only, so no barrier is skipped).
struct VulkanGroups {
  static constexpr uint32_t kMaxX = 32768;
  uint32_t x = 1;
  uint32_t y = 1;

  static VulkanGroups Cover(uint64_t groups) {
    return {static_cast<uint32_t>(std::clamp<uint64_t>(groups, 1, kMaxX)),
            static_cast<uint32_t>((groups + kMaxX - 1) / kMaxX)};
  }
};

// Push constants: the bytes of `words` (at most 32 words, Vulkan's guaranteed 128 bytes).
template <size_t N>
std::span<const uint8_t> PushBytes(const std::array<uint32_t, N>& words) {
  static_assert(N <= 32, "push constants are at most 128 bytes");
  return {reinterpret_cast<const uint8_t*>(words.data()), N * sizeof(uint32_t)};
}
inline uint32_t PushFloat(float f) { return std::bit_cast<uint32_t>(f); }
inline uint32_t PushInt(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace kvserve
