// The sliding-window kind: a query at position p reads the keys max(0, p - window + 1) .. p
// (Gemma's local layers, Mistral's llama.attention.sliding_window). A sequence gives back the
// blocks wholly before the window of its next position (at block granularity), so a long one
// holds about window / block_size + 1 blocks; a prefix hit needs only the blocks of the window
// before its end (docs/kv-cache.md, "Layer groups").
#pragma once

#include "kv/kv_cache_kind.h"

namespace kvserve {

class SlidingWindowKind final : public KvCacheKind {
 public:
  // `window` >= 1: keys per query, the query's own included.
  static KvCacheKindPtr Make(int window);
  explicit SlidingWindowKind(int window) : window_(window) {}

  std::string Describe() const override { return "sliding window " + std::to_string(window_); }
  bool keeps_every_block() const override { return false; }
  int FirstLiveBlock(int next_position, int block_size) const override;
  // The blocks the window of the newest position touches, ceil((window - 1) / block_size) + 1,
  // at most the full count.
  int BlocksPerSequence(int n_tokens, int block_size) const override;
  int attention_window() const override { return window_; }
  bool disk_storable() const override { return true; }

 private:
  int window_;
};

}  // namespace kvserve
