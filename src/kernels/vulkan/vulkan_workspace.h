// A Workspace of the Vulkan backend: its Floats buffers are device memory (VulkanMemory), so the
// shaders read and write the model's activations in place, and it holds a workspace of the CPU
// backend for the operations that still run there. Staging buffers carry the arguments that live
// in plain host memory (a model's std::vector) to and from a shader. Not shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/vulkan/vulkan_memory.h"

namespace kvserve {

class VulkanWorkspace final : public Workspace {
 public:
  VulkanWorkspace(VulkanMemory& memory, std::unique_ptr<Workspace> cpu)
      : memory_(memory), cpu_(std::move(cpu)) {}

  float* Floats(int id, size_t n) override;
  Counters counters() const override { return cpu_->counters(); }
  int threads() const override { return cpu_->threads(); }

  // The CPU backend's workspace, for the operations that run there.
  Workspace& cpu() { return *cpu_; }
  // At least `bytes` of device memory for argument `slot` of one operation (0 .. 7); the contents
  // survive until the next call for that slot.
  uint8_t* Staging(int slot, size_t bytes);
  // At least `bytes` of device memory the backend itself fills for slot `slot` (kRopeAngles,
  // kQuantizedInput,
  // kBlockTables); apart from the model's Floats ids and the staging slots.
  enum ScratchSlot { kRopeAngles = 0, kQuantizedInput = 1, kBlockTables = 2 };
  uint8_t* Scratch(ScratchSlot slot, size_t bytes);

 private:
  uint8_t* Grow(std::vector<Buffer>& buffers, int id, size_t bytes);

  VulkanMemory& memory_;
  std::unique_ptr<Workspace> cpu_;
  std::vector<Buffer> floats_;
  std::vector<Buffer> staging_;
  std::vector<Buffer> scratch_;
};

// The Vulkan backend's workspace behind a Workspace& (every one it is handed comes from its own
// NewWorkspace).
inline VulkanWorkspace& Vk(Workspace& ws) { return static_cast<VulkanWorkspace&>(ws); }

}  // namespace kvserve
