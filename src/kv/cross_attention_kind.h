// The cross-attention kind: an encoder-decoder's decoder layers read, at every step, the K and V
// of the encoder's output over the sequence's whole encoder input (T5). The blocks hold the
// input's positions 0 .. length - 1, are written once when the encoder runs and read-only after;
// every query reads all of them (not causal: AttentionBatch::key_counts), so a sequence keeps
// every block until it ends. What the blocks hold depends on the whole input, not on a prefix of
// it: no prefix of one input is valid for another, so a hit needs the same input entire.
#pragma once

#include "kv/kv_cache_kind.h"

namespace kvserve {

class CrossAttentionKind final : public KvCacheKind {
 public:
  static KvCacheKindPtr Make();

  std::string Describe() const override { return "cross-attention"; }
  bool keeps_every_block() const override { return true; }
  int FirstLiveBlock(int next_position, int block_size) const override { return 0; }
  // n_tokens: the encoder input's length.
  int BlocksPerSequence(int n_tokens, int block_size) const override;
  int attention_window() const override { return 0; }
  // Its blocks are valid only for the same whole input, which the prefix keys of the disk tier
  // do not say.
  bool disk_storable() const override { return false; }
};

}  // namespace kvserve
