// What a model needs from the KV cache, declared by the model (Model::kv_spec) and honoured by
// kv/ (storage, views) and the engine (block accounting): groups of layers, each with the kind of
// attention its cache serves and the shape of one token's K/V row. The element format is chosen
// per group by the user (KvCache's constructor), within what the group's kind allows.
//
// Each group has a kind (kv_cache_kind.h: full causal, sliding window; one class each), its own
// block pool (KvCache's pools, one BlockManager pool) and each sequence one row of block ids per
// group; the kind says how many blocks a sequence holds there, which it gives back as it
// advances, what a prefix hit needs and which keys attention reads (docs/kv-cache.md, "Layer
// groups"). The engine asks the spec, never the model.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kv/full_causal_kind.h"
#include "kv/kv_cache_kind.h"
#include "kv/kv_format.h"

namespace kvserve {

struct KvGroupSpec {
  KvCacheKindPtr kind = FullCausalKind::Make();  // never null
  std::vector<int> layers;                       // model layer indices, ascending
  int n_kv_heads = 0;
  int head_dim = 0;
  // A recurrent-state group (kind->per_position() false): floats of one layer's state in one
  // block, in place of K/V rows (always F32, whatever the KV type). 0 for attention groups.
  int64_t state_floats = 0;

  // Elements of one token's K row (V likewise).  [n_kv_heads * head_dim]
  int64_t row_elements() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  // Bytes of one block of this group over its layers, K and V rows in `type` (or the states).
  uint64_t BlockBytes(KvType type, int block_size) const;
  // Most blocks one decoding sequence of up to n_ctx tokens holds in this group's pool (the
  // kind's rule).
  int BlocksPerSequence(int n_ctx, int block_size) const {
    return kind->BlocksPerSequence(n_ctx, block_size);
  }
};

struct KvSpec {
  std::vector<KvGroupSpec> groups;
  // Layers without a cache of their own (Gemma 4's shared-KV layers: the last ones): each reads
  // the cache of another layer, which a group holds. (layer, the layer it reads)
  std::vector<std::pair<int, int>> readers;

  // One group of every layer, all of one shape.
  static KvSpec Uniform(int n_layers, int n_kv_heads, int head_dim);
  int n_layers() const;
  // Bytes of K and V per token of context, over every layer, each group in its format's type
  // (recurrent-state groups hold bytes per sequence, not per token: not counted).
  uint64_t BytesPerToken(const KvFormat& format) const;
  // Whether some group holds a recurrent state (a hybrid model's linear-attention layers).
  bool has_recurrent_state() const;
  // Bytes of K and V that one sequence of n_tokens tokens holds at most, over every group
  // (BlocksPerSequence blocks of block_size tokens in each).
  uint64_t BytesHeld(const KvFormat& format, int n_tokens, int block_size) const;
  // OK when `format` names one type, or one per group (its message names both counts).
  Status CheckFormat(const KvFormat& format) const;
};

}  // namespace kvserve
