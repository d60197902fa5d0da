// VulkanDevice's copies between host memory and device buffers (vulkan_device.h): what reaches
// memory the host cannot map (VulkanMemoryKind::kDeviceOnly) goes through a mapped staging
// buffer and the queue's copy command.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/vulkan/vulkan_device.h"

namespace kvserve {

namespace {

// Bytes staged per copy: large enough that a model's matrices take few submissions, small
// enough that the staging buffer is a small part of the memory a model needs.
constexpr size_t kStagingBytes = size_t{32} << 20;

void Check(VkResult result, const char* what) {
  if (result != VK_SUCCESS) {
    throw std::runtime_error(std::string("Vulkan: ") + what + " failed (VkResult " +
                             std::to_string(static_cast<int>(result)) + ")");
  }
}

}  // namespace

void VulkanDevice::CopyLocked(VkBuffer from, size_t from_offset, VkBuffer to, size_t to_offset,
                              size_t bytes) {
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  Check(vkResetCommandBuffer(commands_, 0), "reset command buffer");
  Check(vkBeginCommandBuffer(commands_, &begin), "begin command buffer");
  const VkBufferCopy region{from_offset, to_offset, bytes};
  vkCmdCopyBuffer(commands_, from, to, 1, &region);
  // The copy's writes become visible to later shaders and to the host after the fence.
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask =
      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &barrier, 0, nullptr, 0, nullptr);
  Check(vkEndCommandBuffer(commands_), "end command buffer");
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands_;
  Check(vkQueueSubmit(queue_, 1, &submit, fence_), "queue submit");
  Check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "wait for fence");
  Check(vkResetFences(device_, 1, &fence_), "reset fence");
  submits_.fetch_add(1, std::memory_order_relaxed);
}

void VulkanDevice::Transfer(const VulkanBuffer& buffer, size_t offset, size_t bytes,
                            const uint8_t* from_host, uint8_t* to_host) {
  if (bytes == 0) return;
  const VulkanBuffer staging = CreateBuffer(std::min(bytes, kStagingBytes));
  {
    std::lock_guard lock(mutex_);
    FlushLocked();  // recorded dispatches read or write there first; the command buffer is free
    for (size_t done = 0; done < bytes; done += staging.bytes) {
      const size_t n = std::min(staging.bytes, bytes - done);
      if (from_host != nullptr) {
        std::memcpy(staging.mapped, from_host + done, n);
        CopyLocked(staging.buffer, 0, buffer.buffer, offset + done, n);
      } else {
        CopyLocked(buffer.buffer, offset + done, staging.buffer, 0, n);
        std::memcpy(to_host + done, staging.mapped, n);
      }
    }
  }
  DestroyBuffer(staging);
}

}  // namespace kvserve
