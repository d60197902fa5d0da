// The cross-attention kind: an encoder-decoder's decoder layers read, at every step, the K and V
// of the encoder's output over the sequence's whole encoder input (T5). The blocks hold the
// input's positions 0 .. length - 1, are written once when the encoder runs and read-only after;
// every query reads all of them (not causal: AttentionBatch::key_counts). They are not indexed by
// the decoder's positions: a sequence holds them apart from its BlockTable
// (BlockManager::AllocateInput), whose row of this group stays kNoBlock, so the kind asks nothing
// of the decoder's blocks (no block per position, none for a prefix hit). What the blocks hold
// depends on the whole input, not on a prefix of it: they are keyed by the input entire.
#pragma once

#include "kv/kv_cache_kind.h"

namespace kvserve {

class CrossAttentionKind final : public KvCacheKind {
 public:
  static KvCacheKindPtr Make();

  std::string Describe() const override { return "cross-attention"; }
  std::string PositionNoun() const override { return "encoder input token"; }
  // The decoder's rows of this group are all kNoBlock: nothing to keep, nothing a hit needs.
  bool keeps_every_block() const override { return false; }
  int FirstLiveBlock(int next_position, int block_size) const override {
    return (next_position + block_size - 1) / block_size;
  }
  // n_tokens: the encoder input's length (at most the context).
  int BlocksPerSequence(int n_tokens, int block_size) const override;
  int attention_window() const override { return 0; }
  // Its blocks are valid for the same whole input (and salt), which their keys say
  // (BlockManager::InputBlockKey of the input's key and the block's index): the disk tier keeps
  // them under those keys and reads an input's blocks back before AllocateInput looks
  // (KvDiskSpill::RestoreInput), never as part of a token prefix.
  bool disk_storable() const override { return true; }
  bool indexed_by_position() const override { return false; }
  bool HoldsBlock(int logical, int last) const override { return false; }
  int BlocksPerChunk(int n_tokens, int block_size) const override { return 0; }
};

}  // namespace kvserve
