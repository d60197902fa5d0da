// A Workspace of the Vulkan backend: its Floats buffers are device memory (VulkanMemory), so the
// shaders read and write the model's activations in place, and it holds a workspace of the CPU
// backend for the operations that still run there. Its transient memory carries the arguments that
// live in plain host memory (a model's std::vector) to a shader. Not shared between threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/vulkan/vulkan_memory.h"

namespace kvserve {

class VulkanWorkspace final : public Workspace {
 public:
  VulkanWorkspace(VulkanMemory& memory, const VulkanDevice& device, std::unique_ptr<Workspace> cpu)
      : memory_(memory), device_(device), cpu_(std::move(cpu)) {}

  float* Floats(int id, size_t n) override;
  // The CPU workspace's, and the device's dispatches and waits (all threads').
  Counters counters() const override;
  int threads() const override { return cpu_->threads(); }

  // The CPU backend's workspace, for the operations that run there.
  Workspace& cpu() { return *cpu_; }

  // Device memory for one operation's dispatches, filled by the host (staged host arguments, RoPE
  // angles, block tables) or by an earlier dispatch of the operation (x rounded to 8 bits),
  // 64-byte aligned: it stays as written until every dispatch this workspace recorded since is
  // done. Recorded dispatches are not submitted at once (VulkanDevice::Dispatch), so each
  // operation's bytes need their own place.
  uint8_t* Transient(size_t bytes);
  // Called as an operation starts, with VulkanDevice::completed(): once every dispatch this
  // workspace recorded has run, the transient memory is used again from its start.
  void BeginOperation(uint64_t completed);
  // The batch (VulkanDevice::Dispatch's number) of the last dispatch recorded with this
  // workspace's transient memory.
  void NoteDispatch(uint64_t batch) { last_batch_ = std::max(last_batch_, batch); }

 private:
  static constexpr size_t kTransientAlignment = 64;
  static constexpr size_t kFirstChunkBytes = size_t{1} << 20;
  uint8_t* Grow(std::vector<Buffer>& buffers, int id, size_t bytes);

  VulkanMemory& memory_;
  const VulkanDevice& device_;
  std::unique_ptr<Workspace> cpu_;
  std::vector<Buffer> floats_;
  // The transient memory: chunks filled in order; used_ bytes of chunks_.back() are taken.
  std::vector<Buffer> chunks_;
  size_t used_ = 0;
  uint64_t last_batch_ = 0;
};

// The Vulkan backend's workspace behind a Workspace& (every one it is handed comes from its own
// NewWorkspace).
inline VulkanWorkspace& Vk(Workspace& ws) { return static_cast<VulkanWorkspace&>(ws); }

}  // namespace kvserve
