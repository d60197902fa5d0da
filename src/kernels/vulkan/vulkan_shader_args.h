// The arguments of one dispatch: host pointers turned into storage-buffer bindings and the word
// offsets the shader adds. Device memory (VulkanMemory) binds in place, at the largest multiple
// of the storage alignment at or below the pointer; plain host memory is copied into the
// workspace's transient memory first and, for outputs, copied back once the dispatch has run
// (Dispatch then waits for it). Each binding spans exactly the bytes its argument needs. Made
// at the start of an operation, before the operation takes transient memory.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/vulkan/vulkan_device.h"
#include "kernels/vulkan/vulkan_memory.h"
#include "kernels/vulkan/vulkan_workspace.h"

namespace kvserve {

class VulkanShaderArgs {
 public:
  // kStarts: the first dispatch of a backend operation, which may reuse the transient memory
  // (VulkanWorkspace::BeginOperation); kContinues: a later one, whose operation already holds
  // transient bytes it reads.
  enum Operation { kStarts, kContinues };
  VulkanShaderArgs(const VulkanMemory& memory, VulkanWorkspace& ws, VulkanDevice& device,
                   Operation operation = kStarts)
      : memory_(memory),
        ws_(ws),
        device_(device),
        alignment_(device.storage_alignment()),
        max_range_(device.max_storage_range()) {
    if (operation == kStarts) ws_.BeginOperation(device.completed());
  }

  // Binds [p, p + bytes) as the next binding; returns p's offset in 32-bit words from the binding's
  // start (p must be 4-byte aligned when it is device memory). An output is copied in as well,
  // so it may be read and written.
  uint32_t Input(const void* p, size_t bytes);
  uint32_t Output(void* p, size_t bytes);
  // Byte offset instead of words, for byte-addressed data (weights): any alignment.
  uint32_t InputBytes(const void* p, size_t bytes);

  std::span<const VulkanBinding> bindings() const { return bindings_; }
  // False when a binding spans more than the device allows in one binding (a weight matrix or a
  // KV pool past 128 MiB on lavapipe): the caller then runs the operation on the CPU backend.
  bool fits() const { return fits_; }
  // Records shader `name` with these bindings (VulkanDevice::Dispatch); when an output is host
  // memory, waits for it and copies the output back.
  void Dispatch(std::string_view name, std::span<const uint8_t> push, uint32_t x, uint32_t y,
                uint32_t z);

 private:
  uint32_t Bind(const void* p, size_t bytes, bool output, bool in_bytes);

  struct CopyBack {
    void* host;
    const uint8_t* staged;
    size_t bytes;
  };
  const VulkanMemory& memory_;
  VulkanWorkspace& ws_;
  VulkanDevice& device_;
  size_t alignment_;
  size_t max_range_;
  bool fits_ = true;
  std::vector<VulkanBinding> bindings_;
  std::vector<CopyBack> copy_back_;
};

}  // namespace kvserve
