// One Vulkan device opened for compute: the instance, the logical device and its compute queue,
// buffers of host-visible memory, the pipelines of the embedded shaders, and one command buffer
// that collects dispatches (Dispatch records, with a barrier between each, so they run in order)
// until the host needs their results (Flush submits them all and waits). Whoever reads or writes
// on the host memory that a recorded dispatch uses calls Flush first (vulkan_backend.h says
// where the backend does). Thread rules: every member is safe to call from any thread; Dispatch,
// Flush and the buffer calls serialize on the device's mutex.
#pragma once

#include "kernels/vulkan/vulkan_loader.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

// What `kvserve doctor` lists per device.
struct VulkanDeviceInfo {
  int index = 0;
  std::string name;                 // "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H200"
  std::string type;                 // "cpu", "discrete", "integrated", "virtual", "other"
  std::string api_version;          // "1.3.230"
  uint64_t memory_bytes = 0;        // the largest device-local heap
  uint32_t subgroup_size = 0;       // threads per subgroup
  bool cooperative_matrix = false;  // VK_KHR_cooperative_matrix
  bool push_descriptor = false;     // VK_KHR_push_descriptor (required)
  // Storage buffers bind at multiples of this many bytes (minStorageBufferOffsetAlignment, at
  // least 16); one binding spans at most max_storage_range bytes (maxStorageBufferRange: 128 MiB
  // on lavapipe, 4 GiB on most GPUs); one allocation holds at most max_allocation_bytes
  // (maxMemoryAllocationSize: 2 GiB on lavapipe; Vulkan promises 1 GiB).
  size_t storage_alignment = 16;
  size_t max_storage_range = size_t{1} << 27;
  uint64_t max_allocation_bytes = uint64_t{1} << 30;
};

// "0: llvmpipe (LLVM 15.0.6, 256 bits) (cpu, Vulkan 1.3.230), 15.6 GiB, subgroup 8, cooperative
// matrix no": one line of `kvserve doctor`.
std::string DescribeVulkanDevice(const VulkanDeviceInfo& info);

// Where a buffer's memory lies. kMapped: host-visible, host-coherent, mapped for the buffer's
// whole life (device-local too where the device has such memory: lavapipe, integrated GPUs, a
// discrete GPU's resizable BAR). kDeviceOnly: device-local memory the host cannot map (a
// discrete GPU's own memory, however small its BAR); the host reaches it through Transfer.
enum class VulkanMemoryKind { kMapped, kDeviceOnly };

// A buffer of device memory; `mapped` is its host address (kMapped) or nullptr (kDeviceOnly).
struct VulkanBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;
  size_t bytes = 0;
};

// A storage buffer a shader reads or writes: `range` bytes from `offset` (a multiple of the
// device's storage alignment; range at most max_storage_range()).
struct VulkanBinding {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize range = 0;
};

class VulkanDevice {
 public:
  // Every device the loader reports (empty when there is no loader or driver).
  static Result<std::vector<VulkanDeviceInfo>> List();
  // Opens device `index` of List(); an error names the index and what is missing.
  static Result<std::unique_ptr<VulkanDevice>> Open(int index);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  const VulkanDeviceInfo& info() const { return info_; }
  size_t storage_alignment() const { return info_.storage_alignment; }
  size_t max_storage_range() const { return info_.max_storage_range; }
  uint64_t max_allocation_bytes() const { return info_.max_allocation_bytes; }

  // A buffer of `bytes`, zeroed when kMapped (kDeviceOnly: its contents are undefined until
  // written); throws std::bad_alloc when the device has no room of that kind.
  VulkanBuffer CreateBuffer(size_t bytes, VulkanMemoryKind kind = VulkanMemoryKind::kMapped);
  void DestroyBuffer(const VulkanBuffer& buffer);
  // Copies `bytes` at `offset` in `buffer` from `from_host` (when not null) or to `to_host`,
  // through a mapped staging buffer and the queue's copy command, after the recorded dispatches
  // have run; returns once the copy is done. For buffers of either kind.
  void Transfer(const VulkanBuffer& buffer, size_t offset, size_t bytes, const uint8_t* from_host,
                uint8_t* to_host);
  // Whether the device has memory of `kind` (kDeviceOnly: device-local memory at all).
  bool HasMemory(VulkanMemoryKind kind) const {
    return MemoryType(kind) != memory_.memoryTypeCount;
  }

  // Records shader `name` (a SpirvModules() entry) over groups (x, y, z) with `bindings` as
  // bindings 0..n-1 and `push` as its push constants (at most 128 bytes), after every dispatch
  // recorded before it. Returns the number of the batch it joined: it has run once completed()
  // reaches that number. In synchronous mode (set_synchronous), it runs before Dispatch returns.
  uint64_t Dispatch(std::string_view name, std::span<const VulkanBinding> bindings,
                    std::span<const uint8_t> push, uint32_t x, uint32_t y, uint32_t z);
  // Submits the recorded dispatches and waits for them, so the host may then read what they
  // wrote and write what they read; nothing when none is recorded. Called before a buffer is
  // destroyed too.
  void Flush();
  // The last batch that has run (0 before any).
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  // Each dispatch submitted on its own and waited for (KVSERVE_VULKAN_SYNC=1; the tests compare
  // the two modes' bits).
  void set_synchronous(bool synchronous) { synchronous_ = synchronous; }
  // Dispatches recorded and batches submitted so far (doctor, bench and the tests).
  uint64_t dispatches() const { return dispatches_.load(std::memory_order_relaxed); }
  uint64_t submits() const { return submits_.load(std::memory_order_relaxed); }

 private:
  struct Pipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
  };
  VulkanDevice() = default;
  Status Init(VkPhysicalDevice physical, const VulkanDeviceInfo& info);
  const Pipeline& PipelineFor(std::string_view name, size_t n_bindings);
  uint32_t MemoryType(VulkanMemoryKind kind) const;
  // CreateBuffer and DestroyBuffer's work (mutex_ held; no flush).
  VulkanBuffer CreateBufferLocked(size_t bytes, VulkanMemoryKind kind = VulkanMemoryKind::kMapped);
  void DestroyBufferLocked(const VulkanBuffer& buffer);
  // Records, submits and waits for one copy between buffers (mutex_ held, nothing recorded).
  void CopyLocked(VkBuffer from, size_t from_offset, VkBuffer to, size_t to_offset, size_t bytes);
  // Called with mutex_ held.
  void FlushLocked();
  // Resets and begins the command buffer; ends, submits and waits for it (mutex_ held).
  void BeginLocked();
  void SubmitLocked();

  // A batch of more dispatches than this is submitted (bounds the command buffer's size).
  static constexpr uint32_t kMaxRecorded = 4096;

  VulkanDeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set_ = nullptr;
  VkPhysicalDeviceMemoryProperties memory_{};
  std::map<std::string, Pipeline, std::less<>> pipelines_;
  uint32_t recorded_ = 0;  // dispatches in the open command buffer
  uint64_t open_batch_ = 1;
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> dispatches_{0};
  std::atomic<uint64_t> submits_{0};
  bool synchronous_ = false;
  VulkanBuffer staging_;  // mapped; Transfer's, made at its first call
  std::mutex mutex_;
};

}  // namespace kvserve
