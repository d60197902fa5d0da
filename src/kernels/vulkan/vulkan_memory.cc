#include "kernels/vulkan/vulkan_memory.h"

#include <cassert>
#include <cstring>

namespace kvserve {

VulkanMemory::~VulkanMemory() {
  for (auto& [address, buffer] : buffers_) device_.DestroyBuffer(buffer);
}

Buffer VulkanMemory::AllocateZeroed(size_t bytes) {
  VulkanBuffer buffer = device_.CreateBuffer(bytes);  // zeroed; throws std::bad_alloc
  std::lock_guard lock(mutex_);
  buffers_[reinterpret_cast<uintptr_t>(buffer.mapped)] = buffer;
  return Buffer(buffer.mapped, bytes, this);
}

void VulkanMemory::Free(uint8_t* data, size_t bytes) {
  VulkanBuffer buffer;
  {
    std::lock_guard lock(mutex_);
    auto it = buffers_.find(reinterpret_cast<uintptr_t>(data));
    assert(it != buffers_.end() && it->second.bytes == bytes);
    if (it == buffers_.end()) return;
    buffer = it->second;
    buffers_.erase(it);
  }
  device_.DestroyBuffer(buffer);
}

void VulkanMemory::CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const {
  device_.Flush();  // what recorded dispatches write there
  std::memcpy(host, src, bytes);
}

void VulkanMemory::CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const {
  device_.Flush();  // recorded dispatches read or write there first
  std::memcpy(dst, host, bytes);
}

std::optional<VulkanLocation> VulkanMemory::Find(const void* p, size_t bytes) const {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = buffers_.upper_bound(address);
  if (it == buffers_.begin()) return std::nullopt;
  --it;
  const size_t offset = address - it->first;
  if (offset + bytes > it->second.bytes) return std::nullopt;
  return VulkanLocation{it->second.buffer, offset, it->second.bytes - offset};
}

size_t VulkanMemory::bytes_held() const {
  std::lock_guard lock(mutex_);
  size_t total = 0;
  for (const auto& [address, buffer] : buffers_) total += buffer.bytes;
  return total;
}

}  // namespace kvserve
