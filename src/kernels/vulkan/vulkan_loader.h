// The Vulkan loader (libvulkan.so.1), opened at run time rather than linked: a build with the
// Vulkan backend starts on machines without the loader, and only `--backend vulkan` is refused
// there (LoadVulkan's error says what to install). Every Vulkan function the backend calls is a
// pointer in namespace kvserve of the same name, so its code reads as plain Vulkan; the headers
// are included with VK_NO_PROTOTYPES (CMakeLists.txt).
#pragma once

#include <vulkan/vulkan.h>

#include "util/status.h"

namespace kvserve {

// Each core function the backend uses (extensions come from vkGetDeviceProcAddr).
// clang-format off
#define KVSERVE_VULKAN_FUNCTIONS(X) \
  X(vkAllocateCommandBuffers) \
  X(vkAllocateMemory) \
  X(vkBeginCommandBuffer) \
  X(vkBindBufferMemory) \
  X(vkCmdBindPipeline) \
  X(vkCmdCopyBuffer) \
  X(vkCmdDispatch) \
  X(vkCmdPipelineBarrier) \
  X(vkCmdPushConstants) \
  X(vkCreateBuffer) \
  X(vkCreateCommandPool) \
  X(vkCreateComputePipelines) \
  X(vkCreateDescriptorSetLayout) \
  X(vkCreateDevice) \
  X(vkCreateFence) \
  X(vkCreateInstance) \
  X(vkCreatePipelineLayout) \
  X(vkCreateShaderModule) \
  X(vkDestroyBuffer) \
  X(vkDestroyCommandPool) \
  X(vkDestroyDescriptorSetLayout) \
  X(vkDestroyDevice) \
  X(vkDestroyFence) \
  X(vkDestroyInstance) \
  X(vkDestroyPipeline) \
  X(vkDestroyPipelineLayout) \
  X(vkDestroyShaderModule) \
  X(vkDeviceWaitIdle) \
  X(vkEndCommandBuffer) \
  X(vkEnumerateDeviceExtensionProperties) \
  X(vkEnumeratePhysicalDevices) \
  X(vkFreeMemory) \
  X(vkGetBufferMemoryRequirements) \
  X(vkGetDeviceProcAddr) \
  X(vkGetDeviceQueue) \
  X(vkGetPhysicalDeviceMemoryProperties) \
  X(vkGetPhysicalDeviceProperties2) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkMapMemory) \
  X(vkQueueSubmit) \
  X(vkResetCommandBuffer) \
  X(vkResetFences) \
  X(vkUnmapMemory) \
  X(vkWaitForFences)
// clang-format on

#define KVSERVE_DECLARE_VULKAN_FUNCTION(name) extern PFN_##name name;
KVSERVE_VULKAN_FUNCTIONS(KVSERVE_DECLARE_VULKAN_FUNCTION)
#undef KVSERVE_DECLARE_VULKAN_FUNCTION

// Opens the loader (libvulkan.so.1, or the file KVSERVE_VULKAN_LOADER names) and fills every
// pointer above, once per process (thread-safe); later calls return the first call's result.
// Unavailable, naming the library and the package, when the loader is missing or lacks a function.
Status LoadVulkan();

}  // namespace kvserve
