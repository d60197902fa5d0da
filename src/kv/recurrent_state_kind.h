// The recurrent-state kind: layers whose memory of a sequence is one fixed-size state (Gated
// DeltaNet's delta-rule matrix and short-convolution window; Qwen3.5's linear-attention layers),
// not a K/V row per position. Each block of the group's pool holds one state per layer
// (KvGroupSpec::state_floats floats, F32), and the entry of logical block i in a sequence's row
// holds the state after the last token it has computed among positions [i * block_size,
// (i + 1) * block_size): the live state sits in the block of the sequence's last computed token,
// and a full block keeps the state after its last position, frozen once the sequence moves on.
// So a full block is a checkpoint keyed like every block by its token prefix: it goes to the
// prefix cache's LRU when the sequence lets it go, and a later request sharing that prefix
// resumes from it exactly, computing only the rest (docs/kv-cache.md, "Recurrent state").
//
// A sequence keeps the block of its last computed token and, at a block boundary, the one
// before (the window rule with a window of one position); a prefix hit of n blocks needs only
// block n - 1. Inside a prefill chunk only every interval-th block and the chunk's last two get
// a block (HoldsBlock; the others stay kNoBlock and the forward pass runs past them), so a chunk
// of 512 tokens takes a handful of states, not 32; while decoding, every block the sequence
// reaches holds its state. A checkpoint is valid for any later sequence with its prefix, so the
// disk tier stores it like a K/V block (one file per checkpoint: the state of every layer of the
// group). A state is not per position: a rejected speculative token cannot be taken back out of
// it (the scheduler recomputes from the last checkpoint) and a context shift is refused.
#pragma once

#include "kv/kv_cache_kind.h"

namespace kvserve {

class RecurrentStateKind final : public KvCacheKind {
 public:
  // Checkpoints every `interval` blocks inside a prefill chunk (docs/kv-cache.md).
  static constexpr int kDefaultInterval = 4;

  static KvCacheKindPtr Make(int interval = kDefaultInterval);
  explicit RecurrentStateKind(int interval) : interval_(interval) {}

  std::string Describe() const override { return "recurrent state"; }
  bool keeps_every_block() const override { return false; }
  // The block of the last computed token, next_position - 1 (block 0 before any).
  int FirstLiveBlock(int next_position, int block_size) const override;
  // Two: the live block and, once it fills, the next one.
  int BlocksPerSequence(int n_tokens, int block_size) const override;
  int attention_window() const override { return 0; }   // nothing attends to a state
  bool disk_storable() const override { return true; }  // a checkpoint, per prefix key
  bool per_position() const override { return false; }
  // The chunk's last two blocks (the state after its end, and after its last block boundary,
  // where a rejected draft returns to) and every interval-th (a checkpoint).
  bool HoldsBlock(int logical, int last) const override {
    return logical >= last - 1 || (logical + 1) % interval_ == 0;
  }
  int BlocksPerChunk(int n_tokens, int block_size) const override;
  int interval() const { return interval_; }

 private:
  int interval_;
};

}  // namespace kvserve
