#include "kv/kv_cache.h"

#include <cassert>

namespace kvserve {

uint64_t KvCache::BytesPerBlock(const KvSpec& spec, KvType type, int block_size) {
  return spec.BytesPerToken(type) * static_cast<uint64_t>(block_size);
}

KvCache::KvCache(const KvSpec& spec, KvType type, int block_size, int n_blocks,
                 BufferAllocator& allocator)
    : type_(type), block_size_(block_size), n_blocks_(n_blocks) {
  auto pool_bytes = [&](const KvGroupSpec& group) {
    const uint64_t row_bytes = group.row_elements() * KvTypeBytes(type);
    return (row_bytes * block_size * n_blocks + 63) / 64 * 64;
  };
  uint64_t total = 0;
  for (const KvGroupSpec& group : spec.groups) total += pool_bytes(group) * 2 * group.layers.size();
  // Zeroed so that a slot read before it is written (a bug) gives zeros, not stale data.
  memory_ = allocator.AllocateZeroed(total);
  views_.resize(spec.n_layers());
  uint8_t* next = memory_.data();
  for (const KvGroupSpec& group : spec.groups) {
    const uint64_t bytes = pool_bytes(group);
    for (int layer : group.layers) {
      assert(layer >= 0 && layer < static_cast<int>(views_.size()));
      KvLayerView& view = views_[layer];
      view.k = next;
      view.v = next + bytes;
      next += 2 * bytes;
      view.type = type;
      view.block_size = block_size;
      view.n_kv_heads = group.n_kv_heads;
      view.head_dim = group.head_dim;
    }
  }
}

}  // namespace kvserve
