// What a model needs from the KV cache, declared by the model (Model::kv_spec) and honoured by
// kv/ (storage, views) and the engine (block accounting): groups of layers, each with the kind of
// attention its cache serves and the shape of one token's K/V row. The element format is chosen
// per group by the user (KvCache's constructor), within what the group's kind allows.
//
// Kinds: kFullCausal (every key of the sequence, in position order) and kSlidingWindow (a query
// at position p reads the keys max(0, p - window + 1) .. p; gemma's local layers, Mistral's
// llama.attention.sliding_window). Each group has its own block pool (KvCache's pools, one
// BlockManager pool) and each sequence one row of block ids per group; a window group's row
// gives back the blocks that slid out of the window of the sequence's next position, so a long
// sequence holds about window / block_size + 1 blocks there (BlocksPerSequence) while its full
// groups hold all of its blocks (docs/kv-cache.md, "Layer groups"). Where the coming kinds plug
// in: kSinks (the first sink tokens plus a window), kCross (an encoder's keys, filled once at
// admission). The engine asks the spec, never the model.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_format.h"

namespace kvserve {

enum class KvGroupKind : uint8_t { kFullCausal, kSlidingWindow };

struct KvGroupSpec {
  KvGroupKind kind = KvGroupKind::kFullCausal;
  int window = 0;           // kSlidingWindow: keys per query (the query's own included)
  std::vector<int> layers;  // model layer indices, ascending
  int n_kv_heads = 0;
  int head_dim = 0;

  // Elements of one token's K row (V likewise).  [n_kv_heads * head_dim]
  int64_t row_elements() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  // Most blocks one decoding sequence of up to n_ctx tokens holds in this group's pool: every
  // block of the context for a full group; for a window group the blocks that the window of its
  // newest position touches, ceil((window - 1) / block_size) + 1, at most the full count.
  int BlocksPerSequence(int n_ctx, int block_size) const;
};

struct KvSpec {
  std::vector<KvGroupSpec> groups;

  // One group of every layer, all of one shape.
  static KvSpec Uniform(int n_layers, int n_kv_heads, int head_dim);
  int n_layers() const;
  // Bytes of K and V per token of context, over every layer, each group in its format's type.
  uint64_t BytesPerToken(const KvFormat& format) const;
  // Bytes of K and V that one sequence of n_tokens tokens holds at most, over every group
  // (BlocksPerSequence blocks of block_size tokens in each).
  uint64_t BytesHeld(const KvFormat& format, int n_tokens, int block_size) const;
  // OK when `format` names one type, or one per group (its message names both counts).
  Status CheckFormat(const KvFormat& format) const;
};

}  // namespace kvserve
