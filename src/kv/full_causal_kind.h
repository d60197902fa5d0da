// The full causal kind: a query at position p reads every key 0 .. p of its sequence, so a
// sequence keeps every block it wrote (llama, qwen, phi3, gpt2 and Gemma's global layers).
#pragma once

#include "kv/kv_cache_kind.h"

namespace kvserve {

class FullCausalKind final : public KvCacheKind {
 public:
  static KvCacheKindPtr Make();

  std::string Describe() const override { return "full causal"; }
  bool keeps_every_block() const override { return true; }
  int FirstLiveBlock(int next_position, int block_size) const override { return 0; }
  int BlocksPerSequence(int n_tokens, int block_size) const override;
  int attention_window() const override { return 0; }
  bool disk_storable() const override { return true; }
};

}  // namespace kvserve
