#include "kernels/vulkan/vulkan_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

namespace kvserve {

namespace {

std::string VkError(const char* what, VkResult result) {
  return std::string(what) + " failed (VkResult " + std::to_string(static_cast<int>(result)) + ")";
}

Result<VkInstance> CreateInstance() {
  if (Status loaded = LoadVulkan(); !loaded.ok()) return loaded;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kvserve";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  create.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&create, nullptr, &instance);
  if (result != VK_SUCCESS) {
    return Status::Unavailable(VkError("vkCreateInstance (is a Vulkan driver installed?)", result));
  }
  return instance;
}

std::vector<VkPhysicalDevice> PhysicalDevices(VkInstance instance) {
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance, &count, devices.data());
  devices.resize(count);
  return devices;
}

const char* TypeName(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    default:
      return "other";
  }
}

bool HasExtension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

VulkanDeviceInfo Describe(VkPhysicalDevice device, int index) {
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(device, &properties);
  const VkPhysicalDeviceProperties& p = properties.properties;
  VulkanDeviceInfo info;
  info.index = index;
  info.name = p.deviceName;
  info.type = TypeName(p.deviceType);
  info.api_version = std::to_string(VK_API_VERSION_MAJOR(p.apiVersion)) + "." +
                     std::to_string(VK_API_VERSION_MINOR(p.apiVersion)) + "." +
                     std::to_string(VK_API_VERSION_PATCH(p.apiVersion));
  info.subgroup_size = subgroup.subgroupSize;
  info.storage_alignment = std::max<size_t>(16, p.limits.minStorageBufferOffsetAlignment);
  info.max_storage_range = p.limits.maxStorageBufferRange;
  info.max_allocation_bytes = std::max<uint64_t>(maintenance3.maxMemoryAllocationSize, 1u << 30);
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      info.memory_bytes = std::max<uint64_t>(info.memory_bytes, memory.memoryHeaps[h].size);
    }
  }
  info.cooperative_matrix = HasExtension(device, "VK_KHR_cooperative_matrix");
  info.push_descriptor = HasExtension(device, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  return info;
}

}  // namespace

std::string DescribeVulkanDevice(const VulkanDeviceInfo& info) {
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB", info.memory_bytes / 1073741824.0);
  return std::to_string(info.index) + ": " + info.name + " (" + info.type + ", Vulkan " +
         info.api_version + "), " + memory + ", subgroup " + std::to_string(info.subgroup_size) +
         ", cooperative matrix " + (info.cooperative_matrix ? "yes" : "no") +
         (info.push_descriptor ? "" : ", lacks VK_KHR_push_descriptor (not usable)");
}

Result<std::vector<VulkanDeviceInfo>> VulkanDevice::List() {
  Result<VkInstance> instance = CreateInstance();
  if (!instance.ok()) return instance.status();
  std::vector<VulkanDeviceInfo> infos;
  const std::vector<VkPhysicalDevice> devices = PhysicalDevices(instance.value());
  for (size_t i = 0; i < devices.size(); ++i) {
    infos.push_back(Describe(devices[i], static_cast<int>(i)));
  }
  vkDestroyInstance(instance.value(), nullptr);
  return infos;
}

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::Open(int index) {
  Result<VkInstance> instance = CreateInstance();
  if (!instance.ok()) return instance.status();
  std::unique_ptr<VulkanDevice> device(new VulkanDevice());
  device->instance_ = instance.value();
  const std::vector<VkPhysicalDevice> devices = PhysicalDevices(device->instance_);
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    return Status::InvalidArgument("--device " + std::to_string(index) + ": this machine has " +
                                   std::to_string(devices.size()) + " Vulkan device(s)" +
                                   (devices.empty() ? " (no driver found)" : ""));
  }
  const VulkanDeviceInfo info = Describe(devices[index], index);
  if (!info.push_descriptor) {
    return Status::Unavailable("Vulkan device " + std::to_string(index) + " (" + info.name +
                               ") lacks VK_KHR_push_descriptor, which the backend needs");
  }
  Status status = device->Init(devices[index], info);
  if (!status.ok()) return status;
  return device;
}

Status VulkanDevice::Init(VkPhysicalDevice physical, const VulkanDeviceInfo& info) {
  physical_ = physical;
  info_ = info;
  vkGetPhysicalDeviceMemoryProperties(physical, &memory_);
  uint32_t n_families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n_families, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n_families, families.data());
  queue_family_ = n_families;
  for (uint32_t f = 0; f < n_families; ++f) {
    if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = f;
      break;
    }
  }
  if (queue_family_ == n_families) return Status::Unavailable(info.name + " has no compute queue");
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  create.enabledExtensionCount = 1;
  create.ppEnabledExtensionNames = extensions;
  VkResult result = vkCreateDevice(physical, &create, nullptr, &device_);
  if (result != VK_SUCCESS) return Status::Unavailable(VkError("vkCreateDevice", result));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  push_descriptor_set_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
      vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));
  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family_;
  result = vkCreateCommandPool(device_, &pool, nullptr, &pool_);
  if (result != VK_SUCCESS) return Status::Unavailable(VkError("vkCreateCommandPool", result));
  VkCommandBufferAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate.commandPool = pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  result = vkAllocateCommandBuffers(device_, &allocate, &commands_);
  if (result != VK_SUCCESS) return Status::Unavailable(VkError("vkAllocateCommandBuffers", result));
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  result = vkCreateFence(device_, &fence, nullptr, &fence_);
  if (result != VK_SUCCESS) return Status::Unavailable(VkError("vkCreateFence", result));
  return Status::Ok();
}

VulkanDevice::~VulkanDevice() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    for (auto& [name, p] : pipelines_) {
      vkDestroyPipeline(device_, p.pipeline, nullptr);
      vkDestroyPipelineLayout(device_, p.layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
    }
    if (staging_.buffer != VK_NULL_HANDLE) DestroyBufferLocked(staging_);
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

// kMapped: host-visible and coherent, device-local among those when the device has such memory
// (an integrated GPU, lavapipe, a discrete GPU with resizable BAR). kDeviceOnly: device-local,
// and among those one the host cannot map when there is one (a discrete GPU's own memory).
// memory_.memoryTypeCount when there is none.
uint32_t VulkanDevice::MemoryType(VulkanMemoryKind kind) const {
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags needed =
      kind == VulkanMemoryKind::kMapped
          ? host
          : static_cast<VkMemoryPropertyFlags>(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  uint32_t chosen = memory_.memoryTypeCount;
  for (uint32_t t = 0; t < memory_.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[t].propertyFlags;
    if ((flags & needed) != needed) continue;
    if (chosen == memory_.memoryTypeCount) chosen = t;
    const bool preferred = kind == VulkanMemoryKind::kMapped
                               ? (flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0
                               : (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) == 0;
    if (preferred) return t;
  }
  return chosen;
}

VulkanBuffer VulkanDevice::CreateBuffer(size_t bytes, VulkanMemoryKind kind) {
  std::lock_guard lock(mutex_);
  return CreateBufferLocked(bytes, kind);
}

VulkanBuffer VulkanDevice::CreateBufferLocked(size_t bytes, VulkanMemoryKind kind) {
  VulkanBuffer out;
  out.bytes = bytes;
  VkBufferCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create.size = std::max<size_t>(bytes, 16);
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (vkCreateBuffer(device_, &create, nullptr, &out.buffer) != VK_SUCCESS) throw std::bad_alloc();
  VkMemoryRequirements needs{};
  vkGetBufferMemoryRequirements(device_, out.buffer, &needs);
  const uint32_t type = MemoryType(kind);
  VkMemoryAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate.allocationSize = needs.size;
  allocate.memoryTypeIndex = type;
  if (type == memory_.memoryTypeCount || !(needs.memoryTypeBits & (1u << type)) ||
      vkAllocateMemory(device_, &allocate, nullptr, &out.memory) != VK_SUCCESS) {
    vkDestroyBuffer(device_, out.buffer, nullptr);
    throw std::bad_alloc();
  }
  void* mapped = nullptr;
  const bool bound = vkBindBufferMemory(device_, out.buffer, out.memory, 0) == VK_SUCCESS;
  if (!bound || (kind == VulkanMemoryKind::kMapped &&
                 vkMapMemory(device_, out.memory, 0, VK_WHOLE_SIZE, 0, &mapped) != VK_SUCCESS)) {
    vkDestroyBuffer(device_, out.buffer, nullptr);
    vkFreeMemory(device_, out.memory, nullptr);
    throw std::bad_alloc();
  }
  out.mapped = static_cast<uint8_t*>(mapped);
  if (out.mapped != nullptr) std::memset(out.mapped, 0, bytes);
  return out;
}

void VulkanDevice::DestroyBuffer(const VulkanBuffer& buffer) {
  std::lock_guard lock(mutex_);
  FlushLocked();  // a recorded dispatch may use it
  DestroyBufferLocked(buffer);
}

void VulkanDevice::DestroyBufferLocked(const VulkanBuffer& buffer) {
  if (buffer.mapped != nullptr) vkUnmapMemory(device_, buffer.memory);
  vkDestroyBuffer(device_, buffer.buffer, nullptr);
  vkFreeMemory(device_, buffer.memory, nullptr);
}

}  // namespace kvserve
