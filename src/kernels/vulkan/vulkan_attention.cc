#include "kernels/vulkan/vulkan_attention.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/vulkan/vulkan_launch.h"
#include "kernels/vulkan/vulkan_shader_args.h"
#include "kv/kv_format.h"

namespace kvserve {

namespace {

// The shaders index their buffers with 32-bit element and word numbers.
constexpr uint64_t kIndexLimit = uint64_t{1} << 32;
constexpr uint32_t kCausal = 1;
constexpr uint32_t kSinks = 2;
constexpr uint32_t kBias = 4;

size_t ElementBytes(KvType type) { return type == KvType::kF32 ? 4 : 2; }

// The shader of `stem` (store_kv, paged_attention) for a KV type: stem + "_" + KvTypeName.
std::string ShaderFor(std::string_view stem, KvType type) {
  return std::string(stem) + "_" + KvTypeName(type);
}

// Fills paged_attention.comp's `meta` (its layout is in the shader) in ws's transient memory:
// per sequence its table's index and key count, the sinks' bits, then each sequence's table up to
// the last block its tokens read. Returns the pool slots the tokens may read (one past the
// largest physical block they read, times block_size), or -1 when a block they read is negative.
// meta, meta_ints: where the ints went and how many.
int64_t FlattenTables(const KvLayerView& kv, const AttentionBatch& batch,
                      const AttentionParams& params, int n_heads, VulkanWorkspace& ws,
                      const int32_t*& meta_out, size_t& meta_ints) {
  const size_t n_seq = batch.block_tables.size();
  std::vector<int32_t> first_block(n_seq, INT32_MAX);  // the lowest block a token reads
  std::vector<int32_t> end_block(n_seq, 0);            // one past the highest
  for (size_t i = 0; i < batch.positions.size(); ++i) {
    const int s = batch.seq_index[i];
    const AttentionKeys keys = KeysOf(batch, params, i);
    first_block[s] = std::min(first_block[s], keys.first / kv.block_size);
    end_block[s] = std::max(end_block[s], (keys.end + kv.block_size - 1) / kv.block_size);
  }
  const size_t header = 2 * n_seq + static_cast<size_t>(n_heads);
  meta_ints = header;
  for (size_t s = 0; s < n_seq; ++s) meta_ints += end_block[s];
  int32_t* meta = reinterpret_cast<int32_t*>(ws.Transient(meta_ints * sizeof(int32_t)));
  meta_out = meta;
  int64_t max_block = -1;
  size_t next = header;
  for (size_t s = 0; s < n_seq; ++s) {
    const std::vector<int32_t>& table = batch.block_tables[s];
    assert(table.size() >= static_cast<size_t>(end_block[s]));
    meta[s] = static_cast<int32_t>(next);
    meta[n_seq + s] = batch.key_counts.empty() ? 0 : batch.key_counts[s];
    std::copy_n(table.begin(), end_block[s], meta + next);
    for (int32_t b = first_block[s]; b < end_block[s]; ++b) {
      if (table[b] < 0) return -1;
      max_block = std::max<int64_t>(max_block, table[b]);
    }
    next += end_block[s];
  }
  for (int h = 0; h < n_heads; ++h) {
    meta[2 * n_seq + h] = params.sinks != nullptr ? std::bit_cast<int32_t>(params.sinks[h]) : 0;
  }
  return (max_block + 1) * kv.block_size;
}

}  // namespace

bool VulkanAttention::StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
                              const float* v, size_t stride, VulkanWorkspace& ws) const {
  const size_t row_elements = kv.row_elements();
  const bool quantized = KvTypeIsQuantized(kv.type);
  const bool halves = kv.type == KvType::kF16 || kv.type == KvType::kBF16;
  // f16 and bf16 go in words of two elements: rows of an even count; every type's pools start on
  // a word boundary.
  if ((halves && row_elements % 2 != 0) || reinterpret_cast<uintptr_t>(kv.k) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(kv.v) % 4 != 0) {
    return false;
  }
  if (slots.empty()) return true;
  const int64_t max_slot = *std::max_element(slots.begin(), slots.end());
  if (*std::min_element(slots.begin(), slots.end()) < 0) return false;
  // Threads per token: words (f32 elements, f16/bf16 pairs) or, quantized, the words a slot row
  // of any alignment touches.
  const size_t row_units =
      quantized ? kv.slot_bytes() / 4 + 2 : (halves ? row_elements / 2 : row_elements);
  const size_t pool_bytes = static_cast<size_t>(max_slot + 1) * kv.slot_bytes();
  if (!memory_.Find(kv.k, pool_bytes) || !memory_.Find(kv.v, pool_bytes) ||
      static_cast<uint64_t>(max_slot + 2) * kv.slot_bytes() + device_.storage_alignment() >=
          kIndexLimit) {
    return false;
  }
  const size_t n_tokens = slots.size();
  const size_t src_bytes = sizeof(float) * ((n_tokens - 1) * stride + row_elements);
  VulkanShaderArgs args(memory_, ws, device_);
  const uint32_t src_k_word = args.Input(k, src_bytes);
  const uint32_t src_v_word = args.Input(v, src_bytes);
  const uint32_t dst_k_word = args.Output(kv.k, pool_bytes);
  const uint32_t dst_v_word = args.Output(kv.v, pool_bytes);
  const uint32_t slots_word = args.Input(slots.data(), slots.size_bytes());
  const VulkanGroups grid = VulkanGroups::Cover((n_tokens * row_units + 63) / 64);
  if (!args.fits()) return false;
  if (quantized) {
    // store_kv_quant.comp's push constants; the pools' offsets in bytes.
    const std::array<uint32_t, 13> push = {PushInt(n_tokens),
                                           PushInt(row_units),
                                           PushInt(kv.slot_bytes()),
                                           PushInt(kv.head_dim),
                                           PushInt(kv.head_bytes()),
                                           PushInt(KvCodeBytes(kv.type, kv.head_dim)),
                                           PushInt(stride),
                                           src_k_word,
                                           src_v_word,
                                           4 * dst_k_word,
                                           4 * dst_v_word,
                                           slots_word,
                                           grid.x};
    args.Dispatch(ShaderFor("store_kv", kv.type), PushBytes(push), grid.x, grid.y, 2);
  } else {
    const std::array<uint32_t, 9> push = {PushInt(n_tokens), PushInt(row_units), PushInt(stride),
                                          src_k_word,        src_v_word,         dst_k_word,
                                          dst_v_word,        slots_word,         grid.x};
    args.Dispatch(ShaderFor("store_kv", kv.type), PushBytes(push), grid.x, grid.y, 2);
  }
  return true;
}

bool VulkanAttention::PagedAttention(const KvLayerView& kv, const AttentionBatch& batch,
                                     const float* q, int n_heads, const AttentionParams& params,
                                     float* out, VulkanWorkspace& ws) const {
  if (kv.head_dim <= 0 || kv.head_dim > kMaxHeadDim || kv.head_dim % 4 != 0 || kv.n_kv_heads <= 0 ||
      n_heads % kv.n_kv_heads != 0) {
    return false;
  }
  const size_t n_tokens = batch.positions.size();
  if (n_tokens == 0) return true;
  VulkanShaderArgs args(memory_, ws, device_);  // first: FlattenTables takes transient memory
  const int32_t* meta = nullptr;
  size_t meta_ints = 0;
  const int64_t pool_slots = FlattenTables(kv, batch, params, n_heads, ws, meta, meta_ints);
  if (pool_slots < 0) return false;
  const size_t pool_bytes = static_cast<size_t>(pool_slots) * kv.slot_bytes();
  // The shader indexes quantized pools by byte, the others by element.
  const bool quantized = KvTypeIsQuantized(kv.type);
  const uint64_t pool_units =
      static_cast<uint64_t>(pool_slots + 1) * (quantized ? kv.slot_bytes() : kv.row_elements());
  if (!memory_.Find(kv.k, pool_bytes) || !memory_.Find(kv.v, pool_bytes) ||
      pool_units + device_.storage_alignment() >= kIndexLimit) {
    return false;
  }
  // The shader reads float-type K and V 4 elements at a time from the binding's start (quantized
  // ones by bytes: quad_bytes 1).
  const size_t quad_bytes = quantized ? 1 : 4 * ElementBytes(kv.type);
  if (memory_.Find(kv.k, pool_bytes)->offset % device_.storage_alignment() % quad_bytes != 0 ||
      memory_.Find(kv.v, pool_bytes)->offset % device_.storage_alignment() % quad_bytes != 0) {
    return false;
  }
  const size_t rows_bytes = sizeof(float) * n_tokens * n_heads * kv.head_dim;
  const uint32_t q_word = args.Input(q, rows_bytes);
  const uint32_t out_word = args.Output(out, rows_bytes);
  const uint32_t k_quad = args.InputBytes(kv.k, pool_bytes) / quad_bytes;
  const uint32_t v_quad = args.InputBytes(kv.v, pool_bytes) / quad_bytes;
  const uint32_t positions_word = args.Input(batch.positions.data(), batch.positions.size_bytes());
  const uint32_t seq_word = args.Input(batch.seq_index.data(), batch.seq_index.size_bytes());
  const uint32_t meta_word = args.Input(meta, meta_ints * sizeof(int32_t));
  const bool biased = params.position_bias != nullptr;
  const uint32_t bias_word =
      biased ? args.Input(params.position_bias, sizeof(float) * n_heads * params.bias_width)
             : args.Input(q, sizeof(float));  // unread; binding 7 must be bound
  const uint32_t flags = (batch.key_counts.empty() ? kCausal : 0) |
                         (params.sinks != nullptr ? kSinks : 0) | (biased ? kBias : 0);
  const uint64_t n_groups = static_cast<uint64_t>(n_tokens) * n_heads;
  const VulkanGroups grid = VulkanGroups::Cover(n_groups);
  const float soft_cap = params.soft_cap > 0.0f ? params.soft_cap : 0.0f;
  const std::array<uint32_t, 26> push = {PushInt(n_groups),
                                         PushInt(n_heads),
                                         PushInt(kv.head_dim),
                                         PushInt(n_heads / kv.n_kv_heads),
                                         PushInt(kv.block_size),
                                         PushInt(kv.row_elements()),
                                         PushFloat(params.scale),
                                         PushInt(params.window),
                                         PushFloat(soft_cap),
                                         PushFloat(soft_cap > 0.0f ? 1.0f / soft_cap : 0.0f),
                                         flags,
                                         PushInt(params.bias_width),
                                         PushInt(params.bias_zero),
                                         q_word,
                                         out_word,
                                         k_quad,
                                         v_quad,
                                         positions_word,
                                         seq_word,
                                         meta_word,
                                         PushInt(batch.block_tables.size()),
                                         bias_word,
                                         grid.x,
                                         PushInt(kv.slot_bytes()),
                                         PushInt(kv.head_bytes()),
                                         PushInt(KvCodeBytes(kv.type, kv.head_dim))};
  if (!args.fits()) return false;
  args.Dispatch(ShaderFor("paged_attention", kv.type), PushBytes(push), grid.x, grid.y, 1);
  return true;
}

}  // namespace kvserve
