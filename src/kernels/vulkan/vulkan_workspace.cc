#include "kernels/vulkan/vulkan_workspace.h"

#include <algorithm>
#include <cassert>

namespace kvserve {

uint8_t* VulkanWorkspace::Grow(std::vector<Buffer>& buffers, int id, size_t bytes) {
  assert(id >= 0);
  if (static_cast<size_t>(id) >= buffers.size()) buffers.resize(id + 1);
  Buffer& buffer = buffers[id];
  if (buffer.size() < bytes) {
    buffer = Buffer();  // free the old one first: the contents need not survive a growth
    buffer = memory_.AllocateZeroed(bytes + bytes / 4);  // room to grow without a realloc per step
  }
  return buffer.data();
}

float* VulkanWorkspace::Floats(int id, size_t n) {
  return reinterpret_cast<float*>(Grow(floats_, id, std::max<size_t>(n, 1) * sizeof(float)));
}

uint8_t* VulkanWorkspace::Staging(int slot, size_t bytes) {
  assert(slot < 8);
  return Grow(staging_, slot, std::max<size_t>(bytes, 4));
}

uint8_t* VulkanWorkspace::Scratch(ScratchSlot slot, size_t bytes) {
  return Grow(scratch_, slot, std::max<size_t>(bytes, 4));
}

}  // namespace kvserve
