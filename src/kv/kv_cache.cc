#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>

namespace kvserve {

uint64_t KvCache::BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size) {
  return spec.BytesPerToken(format) * static_cast<uint64_t>(block_size);
}

uint64_t KvCache::BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size,
                                int group) {
  const KvGroupSpec& g = spec.groups[group];
  return 2 * g.layers.size() * static_cast<uint64_t>(g.n_kv_heads) *
         KvHeadBytes(format.group(group), g.head_dim) * static_cast<uint64_t>(block_size);
}

KvCache::KvCache(const KvSpec& spec, const KvFormat& format, int block_size,
                 std::vector<int> n_blocks, BufferAllocator& allocator)
    : format_(format),
      allocator_(&allocator),
      block_size_(block_size),
      n_blocks_(std::move(n_blocks)) {
  assert(spec.CheckFormat(format).ok());
  assert(n_blocks_.size() == spec.groups.size());
  auto pool_bytes = [&](size_t g) {
    const KvGroupSpec& group = spec.groups[g];
    const uint64_t row_bytes = group.n_kv_heads * KvHeadBytes(format.group(g), group.head_dim);
    return (row_bytes * block_size * static_cast<uint64_t>(n_blocks_[g]) + 63) / 64 * 64;
  };
  uint64_t total = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    total += pool_bytes(g) * 2 * spec.groups[g].layers.size();
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
      view.v = next + bytes;
      next += 2 * bytes;
      view.type = format.group(g);
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
