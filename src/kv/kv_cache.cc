#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <utility>

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
  // One allocation for every pool; one per pool where the allocator caps an allocation below the
  // total (Vulkan's maxMemoryAllocationSize: 2 GiB on lavapipe). Zeroed so that a slot read
  // before it is written (a bug) gives zeros, not stale data.
  const bool one_allocation = total <= allocator.max_allocation_bytes();
  if (one_allocation) pools_.push_back(allocator.AllocateZeroed(total));
  uint8_t* next = one_allocation ? pools_.front().data() : nullptr;
  auto allocate = [&](uint64_t bytes) {
    if (one_allocation) return std::exchange(next, next + bytes);
    pools_.push_back(allocator.AllocateZeroed(bytes));
    return pools_.back().data();
  };
  bytes_ = total;
  views_.resize(spec.n_layers());
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const KvGroupSpec& group = spec.groups[g];
    const uint64_t bytes = pool_bytes(g);
    for (int layer : group.layers) {
      assert(layer >= 0 && layer < static_cast<int>(views_.size()));
      KvLayerView& view = views_[layer];
      view.k = allocate(bytes);
      view.v = group.kind->per_position() ? allocate(bytes) : nullptr;
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

namespace {

// The pools of one layer's block: K then V rows, or the one state.  (pool, bytes)
template <typename Fn>
void ForEachBlockPool(const KvLayerView& view, int block_size, int block, Fn&& fn) {
  if (view.state_floats > 0) {
    fn(reinterpret_cast<uint8_t*>(view.state(block)),
       static_cast<size_t>(view.state_floats) * sizeof(float));
    return;
  }
  const size_t bytes = view.slot_bytes() * block_size;
  for (uint8_t* pool : {view.k, view.v}) fn(pool + static_cast<size_t>(block) * bytes, bytes);
}

}  // namespace

void KvCache::CopyBlockOut(int group, int block, std::span<uint8_t> out) const {
  assert(block >= 0 && block < n_blocks_[group]);
  size_t at = 0;
  for (const KvLayerView& view : views_) {
    if (view.group != group || view.k == nullptr) continue;
    ForEachBlockPool(view, block_size_, block, [&](const uint8_t* pool, size_t bytes) {
      assert(at + bytes <= out.size());
      allocator_->CopyToHost(pool, bytes, out.data() + at);
      at += bytes;
    });
  }
  assert(at == out.size());
}

void KvCache::ZeroSlots(int group, int block, int first_slot) {
  assert(block >= 0 && block < n_blocks_[group] && first_slot >= 0 && first_slot <= block_size_);
  for (const KvLayerView& view : views_) {
    if (view.group != group || view.k == nullptr || view.state_floats > 0) continue;
    const size_t slot = view.slot_bytes();
    const std::vector<uint8_t> zeros(slot * (block_size_ - first_slot), 0);
    for (uint8_t* pool : {view.k, view.v}) {
      uint8_t* at = pool + (static_cast<size_t>(block) * block_size_ + first_slot) * slot;
      allocator_->CopyFromHost(zeros.data(), zeros.size(), at);
    }
  }
}

void KvCache::CopyBlockIn(int group, int block, std::span<const uint8_t> in) {
  assert(block >= 0 && block < n_blocks_[group]);
  size_t at = 0;
  for (const KvLayerView& view : views_) {
    if (view.group != group || view.k == nullptr) continue;
    ForEachBlockPool(view, block_size_, block, [&](uint8_t* pool, size_t bytes) {
      assert(at + bytes <= in.size());
      allocator_->CopyFromHost(in.data() + at, bytes, pool);
      at += bytes;
    });
  }
  assert(at == in.size());
}

}  // namespace kvserve
