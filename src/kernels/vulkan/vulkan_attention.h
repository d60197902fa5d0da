// The Vulkan backend's KV stores and paged attention (Backend::StoreKv, Backend::PagedAttention)
// on the device: shaders store_kv.comp (f32, f16, bf16), store_kv_quant.comp (q8_0, q4_0: the
// CPU's EncodeKvHead bytes) and paged_attention.comp (every KvType; quantized rows dequantized
// exactly, as the CPU's attend_head_quant). The pools are device memory (Backend::allocator() is
// VulkanMemory), bound in place. Each call says whether it ran; a call it does not take (head_dim
// not a multiple of 4 or past 256, odd f16/bf16 rows, pools not on a 4-byte boundary or not in
// device memory, indices past 32 bits) is left to the caller, which runs the CPU backend.
// A token's attention output depends only on its query and its keys' values, never on the batch
// or on which physical blocks hold them (paged_attention.comp). Thread rules: as VulkanDevice;
// a workspace is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/backend.h"
#include "kernels/vulkan/vulkan_device.h"
#include "kernels/vulkan/vulkan_memory.h"
#include "kernels/vulkan/vulkan_workspace.h"
#include "kv/kv_layer_view.h"

namespace kvserve {

class VulkanAttention {
 public:
  // Both borrowed; they must outlive this.
  VulkanAttention(VulkanDevice& device, const VulkanMemory& memory)
      : device_(device), memory_(memory) {}

  // The largest head_dim the attention shader takes (the CPU kernels' limit too).
  static constexpr int kMaxHeadDim = 256;

  // Backend::StoreKv on the device; false (nothing written) when it does not take the call.
  bool StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
               const float* v, size_t stride, VulkanWorkspace& ws) const;
  // Backend::PagedAttention on the device; false (nothing written) when it does not take the
  // call. q, out: [n_tokens, n_heads, head_dim].
  bool PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                      int n_heads, const AttentionParams& params, float* out,
                      VulkanWorkspace& ws) const;

 private:
  VulkanDevice& device_;
  const VulkanMemory& memory_;
};

}  // namespace kvserve
