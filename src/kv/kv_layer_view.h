// One layer's K and V pools as the kernels see them, and the slot formula: the one place that
// says where position p of a sequence lives. Pools are [n_blocks, block_size, n_kv_heads] head
// rows of head_dim elements in `type` (KvHeadBytes each, kv_format.h); a sequence's block table
// maps its logical block i to a physical block. Views are handed out by KvCache (the owner of the
// bytes) to the forward pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_format.h"

namespace kvserve {

// The slot formula and its walk have internal linkage: the per-ISA kernel units include this
// header with different instruction-set flags and must not share one inline copy.
namespace {

// Physical slot of position `pos`: block_table[pos / block_size] * block_size + pos % block_size.
[[maybe_unused]] int64_t KvSlot(const int32_t* block_table, int block_size, int64_t pos) {
  return static_cast<int64_t>(block_table[pos / block_size]) * block_size + pos % block_size;
}

// Walks positions 0, 1, 2, ... of a paged sequence, giving each one's byte offset in a pool whose
// slots are `slot_bytes` apart: KvSlot(p) * slot_bytes without a division per position.
class KvSlotWalk {
 public:
  // Starts at position `first` (a sliding window's first key; 0 = the sequence's first).
  KvSlotWalk(const int32_t* block_table, int block_size, size_t slot_bytes, int first = 0)
      : block_table_(block_table),
        block_size_(block_size),
        slot_bytes_(slot_bytes),
        block_(first / block_size),
        in_block_(first % block_size) {}
  size_t Next() {
    const size_t offset =
        (static_cast<size_t>(block_table_[block_]) * block_size_ + in_block_) * slot_bytes_;
    if (++in_block_ == block_size_) {
      in_block_ = 0;
      ++block_;
    }
    return offset;
  }

 private:
  const int32_t* block_table_;
  int block_size_;
  size_t slot_bytes_;
  int block_ = 0;
  int in_block_ = 0;
};

}  // namespace

struct KvLayerView {
  uint8_t* k = nullptr;  // [n_blocks, block_size, n_kv_heads] head rows of `type`
  uint8_t* v = nullptr;  // same layout
  KvType type = KvType::kF32;
  int block_size = 16;
  int group = 0;  // the layer's KV group (KvSpec::groups index): which block tables address it
  int n_kv_heads = 0;
  int head_dim = 0;
  // Keys a query reads, its own included; 0: every earlier key. The group's cache kind's
  // (KvCacheKind::attention_window), so models do not restate it.
  int attention_window = 0;
  // A recurrent-state group's layer (KvGroupSpec::state_floats > 0): `k` holds one state of
  // state_floats floats per block, `v` is null, and there are no K/V rows.
  int64_t state_floats = 0;

  // The state of block `block` (a recurrent-state layer).
  float* state(int32_t block) const {
    return reinterpret_cast<float*>(k) + static_cast<size_t>(block) * state_floats;
  }

  size_t row_elements() const { return static_cast<size_t>(n_kv_heads) * head_dim; }
  size_t head_bytes() const { return KvHeadBytes(type, head_dim); }
  size_t slot_bytes() const { return static_cast<size_t>(n_kv_heads) * head_bytes(); }
};

}  // namespace kvserve
