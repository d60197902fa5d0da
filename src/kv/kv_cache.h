// The memory behind the KV cache: for every layer of every group of a KvSpec, a K pool and a V
// pool of block_size token slots per block, n_blocks(group) blocks (each group's block ids are
// its own: BlockManager's pool of that group). Owns the bytes (from the backend's
// allocator, so a GPU backend can place them in device memory); hands the forward pass mutable
// per-layer views. Which sequence owns which block is decided elsewhere (BlockManager); this
// class never looks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_format.h"
#include "kv/kv_layer_view.h"
#include "kv/kv_spec.h"
#include "util/buffer.h"

namespace kvserve {

class KvCache {
 public:
  // Throws std::bad_alloc when the allocator has no room (sizes are checked by the caller).
  // `format` must fit `spec` (KvSpec::CheckFormat).
  // n_blocks: per group, in KvSpec::groups order; the int form gives every group n_blocks.
  KvCache(const KvSpec& spec, const KvFormat& format, int block_size, std::vector<int> n_blocks,
          BufferAllocator& allocator);
  KvCache(const KvSpec& spec, const KvFormat& format, int block_size, int n_blocks,
          BufferAllocator& allocator)
      : KvCache(spec, format, block_size, std::vector<int>(spec.groups.size(), n_blocks),
                allocator) {}
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // The view of model layer `layer` (any group). Writing K/V through it needs a mutable cache.
  const KvLayerView& layer(int layer) { return views_[layer]; }
  int n_layers() const { return static_cast<int>(views_.size()); }
  const KvFormat& format() const { return format_; }
  int block_size() const { return block_size_; }
  int n_groups() const { return static_cast<int>(n_blocks_.size()); }
  // Blocks of group 0's pools; of one group's.
  int n_blocks() const { return n_blocks_[0]; }
  int n_blocks(int group) const { return n_blocks_[group]; }
  uint64_t bytes() const { return bytes_; }
  // Bytes of K+V for one block across all layers; across one group's layers.
  static uint64_t BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size);
  static uint64_t BytesPerBlock(const KvSpec& spec, const KvFormat& format, int block_size,
                                int group);
  // One block of one group's pools as one byte string (the disk tier's payload), and back,
  // through the allocator's copies (device memory on a GPU backend): the group's layers in order,
  // each its K then V rows of the block, or its state (a recurrent-state group: state_floats
  // F32). A one-group model's bytes are every layer's K and V.  out, in: [BytesPerBlock(group)]
  void CopyBlockOut(int group, int block, std::span<uint8_t> out) const;
  void CopyBlockIn(int group, int block, std::span<const uint8_t> in);
  // Zeroes the K and V rows of slots [first_slot, block_size) of one block of an attention
  // group, in every layer (an encoder input's last block past the input: what it held before,
  // maybe another tenant's rows, never goes to disk with it).
  void ZeroSlots(int group, int block, int first_slot);

 private:
  KvFormat format_;
  BufferAllocator* allocator_;  // made pools_; not owned, outlives the cache
  int block_size_;
  std::vector<int> n_blocks_;  // [n_groups]
  // Zeroed; the allocations behind the pools (each layer's K and V, or its states; lengths
  // 64-byte multiples): one for all of them, or one per pool past max_allocation_bytes.
  std::vector<Buffer> pools_;
  uint64_t bytes_ = 0;  // of all the pools
  std::vector<KvLayerView> views_;
};

}  // namespace kvserve
