// The Vulkan backend's memory: every buffer it hands out (the KV pools through
// Backend::allocator(), workspaces, weights) is a VulkanBuffer, and the backend finds the buffer
// behind a pointer (Find) to bind it to a shader. AllocateZeroed's buffers are host-visible memory
// mapped for their life, so the host pointer the engine and the models hold *is* the device
// memory (on lavapipe and integrated GPUs the device's own; on a discrete GPU the host-visible
// part). AllocateDeviceOnly's (the weights' on a discrete GPU) cannot be mapped: their pointer is
// an address range reserved with no access, which names the buffer and faults if the host reads
// it; CopyToHost and CopyFromHost reach them through a staging copy.
// Thread rules: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "kernels/vulkan/vulkan_device.h"
#include "util/buffer.h"

namespace kvserve {

// Where a host pointer lies: `offset` bytes into `buffer`, which goes on for `bytes_left` bytes.
struct VulkanLocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  size_t offset = 0;
  size_t bytes_left = 0;
};

class VulkanMemory final : public BufferAllocator {
 public:
  explicit VulkanMemory(VulkanDevice& device) : device_(device) {}
  ~VulkanMemory() override;  // frees the buffers still held

  Buffer AllocateZeroed(size_t bytes) override;
  // `bytes` of device-local memory the host cannot map, contents undefined until copied in
  // (CopyFromHost); throws std::bad_alloc when the device has no room.
  Buffer AllocateDeviceOnly(size_t bytes);
  void Free(uint8_t* data, size_t bytes) override;
  // Mapped memory is host-coherent: copies are plain memcpy once the recorded dispatches are done
  // (both flush the device first); device-only memory goes through VulkanDevice::Transfer. Free
  // flushes too (VulkanDevice::DestroyBuffer).
  void CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const override;
  void CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const override;
  uint64_t max_allocation_bytes() const override { return device_.max_allocation_bytes(); }

  // The buffer holding [p, p + bytes), or none when that range is not memory made here.
  std::optional<VulkanLocation> Find(const void* p, size_t bytes) const;
  // Bytes held now, for doctor and tests.
  size_t bytes_held() const;

 private:
  VulkanDevice& device_;
  mutable std::mutex mutex_;
  void Copy(const uint8_t* from_host, uint8_t* to_host, uint8_t* device, size_t bytes) const;
  // Finds the buffer holding [p, p + bytes) with its offset; mutex_ held.
  const VulkanBuffer* FindLocked(const void* p, size_t bytes, size_t& offset) const;

  std::map<uintptr_t, VulkanBuffer> buffers_;  // by host address (mapped or reserved)
};

}  // namespace kvserve
