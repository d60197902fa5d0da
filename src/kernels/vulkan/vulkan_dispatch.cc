// VulkanDevice's pipelines, dispatches and copies (vulkan_device.h). What reaches memory the host
// cannot map (VulkanMemoryKind::kDeviceOnly) goes through a mapped staging buffer and the queue's
// copy command.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>

#include "kernels/vulkan/spirv_modules.h"
#include "kernels/vulkan/vulkan_device.h"

namespace kvserve {

namespace {

constexpr uint32_t kMaxPushBytes = 128;  // the smallest maxPushConstantsSize Vulkan allows

// Bytes staged per copy (the staging buffer, made at the first Transfer and kept): large enough
// that a model's matrices take few submissions, small enough to be a small part of the memory a
// model needs.
constexpr size_t kStagingBytes = size_t{32} << 20;

std::span<const uint32_t> ModuleCode(std::string_view name) {
  for (const SpirvModule& module : SpirvModules()) {
    if (module.name == name) return module.code;
  }
  return {};
}

void Check(VkResult result, const char* what) {
  if (result != VK_SUCCESS) {
    throw std::runtime_error(std::string("Vulkan: ") + what + " failed (VkResult " +
                             std::to_string(static_cast<int>(result)) + ")");
  }
}

}  // namespace

// Called with mutex_ held. A shader's bindings are storage buffers 0..n_bindings-1, pushed per
// dispatch (no descriptor pools), and its push constants at most kMaxPushBytes.
const VulkanDevice::Pipeline& VulkanDevice::PipelineFor(std::string_view name, size_t n_bindings) {
  auto it = pipelines_.find(name);
  if (it != pipelines_.end()) return it->second;
  const std::span<const uint32_t> code = ModuleCode(name);
  if (code.empty()) throw std::logic_error("no SPIR-V module named " + std::string(name));
  std::vector<VkDescriptorSetLayoutBinding> bindings(n_bindings);
  for (size_t b = 0; b < n_bindings; ++b) {
    bindings[b].binding = static_cast<uint32_t>(b);
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  Pipeline p;
  VkDescriptorSetLayoutCreateInfo set{};
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set.bindingCount = static_cast<uint32_t>(n_bindings);
  set.pBindings = bindings.data();
  Check(vkCreateDescriptorSetLayout(device_, &set, nullptr, &p.set_layout), "set layout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushBytes};
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p.set_layout;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &range;
  Check(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout), "pipeline layout");
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = code.size_bytes();
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  Check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "shader module");
  VkComputePipelineCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = module;
  create.stage.pName = "main";
  create.layout = p.layout;
  const VkResult result =
      vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &create, nullptr, &p.pipeline);
  vkDestroyShaderModule(device_, module, nullptr);
  Check(result, "compute pipeline");
  return pipelines_.emplace(std::string(name), p).first->second;
}

uint64_t VulkanDevice::Dispatch(std::string_view name, std::span<const VulkanBinding> bindings,
                                std::span<const uint8_t> push, uint32_t x, uint32_t y, uint32_t z) {
  assert(push.size() <= kMaxPushBytes && push.size() % 4 == 0);
  std::lock_guard lock(mutex_);
  if (x == 0 || y == 0 || z == 0) return completed_.load(std::memory_order_relaxed);
  const Pipeline& p = PipelineFor(name, bindings.size());
  std::vector<VkDescriptorBufferInfo> infos(bindings.size());
  std::vector<VkWriteDescriptorSet> writes(bindings.size());
  for (size_t b = 0; b < bindings.size(); ++b) {
    infos[b] = {bindings[b].buffer, bindings[b].offset, bindings[b].range};
    writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[b].dstBinding = static_cast<uint32_t>(b);
    writes[b].descriptorCount = 1;
    writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[b].pBufferInfo = &infos[b];
  }
  if (recorded_ == 0) {
    BeginLocked();
  } else {
    // What the dispatches before wrote is visible to this one, and it writes nothing they read
    // before they are done.
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0,
                         nullptr);
  }
  vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  push_descriptor_set_(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                       static_cast<uint32_t>(writes.size()), writes.data());
  if (!push.empty()) {
    vkCmdPushConstants(commands_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(push.size()), push.data());
  }
  vkCmdDispatch(commands_, x, y, z);
  ++recorded_;
  dispatches_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t batch = open_batch_;
  if (synchronous_ || recorded_ >= kMaxRecorded) FlushLocked();
  return batch;
}

void VulkanDevice::Flush() {
  std::lock_guard lock(mutex_);
  FlushLocked();
}

void VulkanDevice::FlushLocked() {
  if (recorded_ == 0) return;
  // The shaders' writes become visible to the host, which reads them after the fence.
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
  SubmitLocked();
  recorded_ = 0;
  completed_.store(open_batch_, std::memory_order_release);
  ++open_batch_;
}

void VulkanDevice::BeginLocked() {
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  Check(vkResetCommandBuffer(commands_, 0), "reset command buffer");
  Check(vkBeginCommandBuffer(commands_, &begin), "begin command buffer");
}

void VulkanDevice::SubmitLocked() {
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

void VulkanDevice::CopyLocked(VkBuffer from, size_t from_offset, VkBuffer to, size_t to_offset,
                              size_t bytes) {
  BeginLocked();
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
  SubmitLocked();
}

void VulkanDevice::Transfer(const VulkanBuffer& buffer, size_t offset, size_t bytes,
                            const uint8_t* from_host, uint8_t* to_host) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  FlushLocked();  // recorded dispatches read or write there first; the command buffer is free
  if (staging_.buffer == VK_NULL_HANDLE) staging_ = CreateBufferLocked(kStagingBytes);
  for (size_t done = 0; done < bytes; done += staging_.bytes) {
    const size_t n = std::min(staging_.bytes, bytes - done);
    if (from_host != nullptr) {
      std::memcpy(staging_.mapped, from_host + done, n);
      CopyLocked(staging_.buffer, 0, buffer.buffer, offset + done, n);
    } else {
      CopyLocked(buffer.buffer, offset + done, staging_.buffer, 0, n);
      std::memcpy(to_host + done, staging_.mapped, n);
    }
  }
}

}  // namespace kvserve
