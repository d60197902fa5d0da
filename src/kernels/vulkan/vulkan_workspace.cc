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

Workspace::Counters VulkanWorkspace::counters() const {
  Counters c = cpu_->counters();
  c.device_dispatches = device_.dispatches();
  c.device_waits = device_.submits();
  return c;
}

float* VulkanWorkspace::Floats(int id, size_t n) {
  return reinterpret_cast<float*>(Grow(floats_, id, std::max<size_t>(n, 1) * sizeof(float)));
}

uint8_t* VulkanWorkspace::Transient(size_t bytes) {
  const size_t aligned = (std::max<size_t>(bytes, 4) + kTransientAlignment - 1) /
                         kTransientAlignment * kTransientAlignment;
  if (chunks_.empty() || used_ + aligned > chunks_.back().size()) {
    // A new chunk: the ones before keep what recorded dispatches still read.
    const size_t last = chunks_.empty() ? kFirstChunkBytes / 2 : chunks_.back().size();
    chunks_.push_back(memory_.AllocateZeroed(std::max(2 * last, aligned)));
    used_ = 0;
  }
  uint8_t* out = chunks_.back().data() + used_;
  used_ += aligned;
  return out;
}

void VulkanWorkspace::BeginOperation(uint64_t completed) {
  if (completed < last_batch_) return;  // a recorded dispatch may still read transient bytes
  if (chunks_.size() > 1) {
    // Keep one chunk as large as the last (the largest): the next steps fit in it.
    Buffer largest = std::move(chunks_.back());
    chunks_.clear();
    chunks_.push_back(std::move(largest));
  }
  used_ = 0;
}

}  // namespace kvserve
