#include "kernels/vulkan/vulkan_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>

namespace kvserve {

namespace {

// The length of the address range naming a device-only buffer of `bytes` (never empty).
size_t ReservedBytes(size_t bytes) { return std::max<size_t>(bytes, 1); }

// An address range for a device-only buffer of `bytes`, which the host may not touch.
uint8_t* ReserveAddresses(size_t bytes) {
  void* p = mmap(nullptr, ReservedBytes(bytes), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

}  // namespace

VulkanMemory::~VulkanMemory() {
  for (auto& [address, buffer] : buffers_) {
    device_.DestroyBuffer(buffer);
    if (buffer.mapped == nullptr) {
      munmap(reinterpret_cast<void*>(address), ReservedBytes(buffer.bytes));
    }
  }
}

Buffer VulkanMemory::AllocateZeroed(size_t bytes) {
  VulkanBuffer buffer = device_.CreateBuffer(bytes);  // zeroed; throws std::bad_alloc
  std::lock_guard lock(mutex_);
  buffers_[reinterpret_cast<uintptr_t>(buffer.mapped)] = buffer;
  return Buffer(buffer.mapped, bytes, this);
}

Buffer VulkanMemory::AllocateDeviceOnly(size_t bytes) {
  VulkanBuffer buffer = device_.CreateBuffer(bytes, VulkanMemoryKind::kDeviceOnly);
  uint8_t* address = nullptr;
  try {
    address = ReserveAddresses(bytes);
  } catch (const std::bad_alloc&) {
    device_.DestroyBuffer(buffer);
    throw;
  }
  std::lock_guard lock(mutex_);
  buffers_[reinterpret_cast<uintptr_t>(address)] = buffer;
  return Buffer(address, bytes, this);
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
  if (buffer.mapped == nullptr) munmap(data, ReservedBytes(bytes));
}

// Copies between host memory and [device, device + bytes): a memcpy once the recorded dispatches
// have run where that memory is mapped, a staged copy where it is device-only.
void VulkanMemory::Copy(const uint8_t* from_host, uint8_t* to_host, uint8_t* device,
                        size_t bytes) const {
  VulkanBuffer device_only;
  size_t offset = 0;
  {
    std::lock_guard lock(mutex_);
    const VulkanBuffer* buffer = FindLocked(device, bytes, offset);
    if (buffer != nullptr && buffer->mapped == nullptr) device_only = *buffer;
  }
  if (device_only.buffer != VK_NULL_HANDLE) {
    device_.Transfer(device_only, offset, bytes, from_host, to_host);
    return;
  }
  device_.Flush();  // recorded dispatches read or write there first
  if (from_host != nullptr) {
    std::memcpy(device, from_host, bytes);
  } else {
    std::memcpy(to_host, device, bytes);
  }
}

void VulkanMemory::CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const {
  Copy(nullptr, host, const_cast<uint8_t*>(src), bytes);  // only read
}

void VulkanMemory::CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const {
  Copy(host, nullptr, dst, bytes);
}

const VulkanBuffer* VulkanMemory::FindLocked(const void* p, size_t bytes, size_t& offset) const {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = buffers_.upper_bound(address);
  if (it == buffers_.begin()) return nullptr;
  --it;
  offset = address - it->first;
  if (offset + bytes > it->second.bytes) return nullptr;
  return &it->second;
}

std::optional<VulkanLocation> VulkanMemory::Find(const void* p, size_t bytes) const {
  std::lock_guard lock(mutex_);
  size_t offset = 0;
  const VulkanBuffer* buffer = FindLocked(p, bytes, offset);
  if (buffer == nullptr) return std::nullopt;
  return VulkanLocation{buffer->buffer, offset, buffer->bytes - offset};
}

size_t VulkanMemory::bytes_held() const {
  std::lock_guard lock(mutex_);
  size_t total = 0;
  for (const auto& [address, buffer] : buffers_) total += buffer.bytes;
  return total;
}

}  // namespace kvserve
