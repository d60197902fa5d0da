#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>

namespace kvserve {

uint64_t KvCache::BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size) {
  uint64_t bytes = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    bytes += spec.groups[g].BlockBytes(format.group(g), block_size);
  }
  return bytes;
}

uint64_t KvCache::BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size,
                                int group) {
  return spec.groups[group].BlockBytes(format.group(group), block_size);
}

KvCache::KvCache(const KvSpec& spec, const KvFormat& format, int block_size,
                 std::vector<int> n_blocks, BufferAllocator& allocator)
    : format_(format),
      allocator_(&allocator),
      block_size_(block_size),
      n_blocks_(std::move(n_blocks)) {
  assert(spec.CheckFormat(format).ok());
  assert(n_blocks_.size() == spec.groups.size());
  // One layer's K pool (V likewise), or its pool of states in a recurrent group.
  auto pool_bytes = [&](size_t g) {
    const KvGroupSpec& group = spec.groups[g];
    const uint64_t block_bytes = group.BlockBytes(format.group(g), block_size) /
                                 (group.kind->per_position() ? 2 : 1) /
                                 std::max<size_t>(1, group.layers.size());
    return (block_bytes * static_cast<uint64_t>(n_blocks_[g]) + 63) / 64 * 64;
  };
  auto pools_per_layer = [&](size_t g) { return spec.groups[g].kind->per_position() ? 2 : 1; };
  uint64_t total = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    total += pool_bytes(g) * pools_per_layer(g) * spec.groups[g].layers.size();
  }
  // Zeroed so that a slot read before it is written (a bug) gives zeros, not stale data.
  memory_ = allocator.AllocateZeroed(total);
  views_.resize(spec.n_layers());
  uint8_t* next = memory_.data();
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const KvGroupSpec& group = spec.groups[g];
    const uint64_t bytes = pool_bytes(g);
    for (int layer : group.layers) {
      assert(layer >= 0 && layer < static_cast<int>(views_.size()));
      KvLayerView& view = views_[layer];
      view.k = next;
      view.v = pools_per_layer(g) == 2 ? next + bytes : nullptr;
      next += pools_per_layer(g) * bytes;
      view.type = group.kind->per_position() ? format.group(g) : KvType::kF32;
      view.state_floats = group.state_floats;
      view.block_size = block_size;
      view.group = static_cast<int>(g);
      view.n_kv_heads = group.n_kv_heads;
      view.head_dim = group.head_dim;
      view.attention_window = group.kind->attention_window();
    }
  }
}

void KvCache::CopyBlockOut(int block, std::span<uint8_t> out) const {
  assert(block >= 0 && block < *std::min_element(n_blocks_.begin(), n_blocks_.end()));
  size_t at = 0;
  for (const KvLayerView& view : views_) {
    const size_t bytes = view.slot_bytes() * block_size_;
    for (const uint8_t* pool : {view.k, view.v}) {
      assert(at + bytes <= out.size());
      allocator_->CopyToHost(pool + static_cast<size_t>(block) * bytes, bytes, out.data() + at);
      at += bytes;
    }
  }
  assert(at == out.size());
}

void KvCache::CopyBlockIn(int block, std::span<const uint8_t> in) {
  assert(block >= 0 && block < *std::min_element(n_blocks_.begin(), n_blocks_.end()));
  size_t at = 0;
  for (const KvLayerView& view : views_) {
    const size_t bytes = view.slot_bytes() * block_size_;
    for (uint8_t* pool : {view.k, view.v}) {
      assert(at + bytes <= in.size());
      allocator_->CopyFromHost(in.data() + at, bytes, pool + static_cast<size_t>(block) * bytes);
      at += bytes;
    }
  }
  assert(at == in.size());
}

}  // namespace kvserve
