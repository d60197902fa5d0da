// What one kind of KV layer group keeps of a sequence, and what that means for blocks and
// attention. One class per kind (full_causal_kind.h, sliding_window_kind.h,
// recurrent_state_kind.h, cross_attention_kind.h); a KvGroupSpec holds one, immutable and
// shared. KvSpec's pool sizing, BlockManager's releases and prefix-hit rule, and the models'
// attention ask it; nothing tests which kind it is.
#pragma once

#include <memory>
#include <string>

namespace kvserve {

class KvCacheKind {
 public:
  virtual ~KvCacheKind() = default;

  // "full causal", "sliding window 4096": for `kvserve info` and messages (and the disk tier's
  // fingerprint: keep it stable).
  virtual std::string Describe() const = 0;
  // What one position of its blocks is, for `kvserve info`'s bytes per position: "token" (of the
  // sequence), or an encoder-decoder's "encoder input token".
  virtual std::string PositionNoun() const { return "token"; }

  // Whether a sequence keeps every block it wrote, so a prefix hit of n blocks needs all n of
  // them cached in this group (false: only those from FirstLiveBlock of the hit's end).
  virtual bool keeps_every_block() const = 0;

  // The first logical block a sequence still reads when its next token to compute is at
  // `next_position`; the blocks before it may go back to the pool. 0 for a kind that keeps all.
  virtual int FirstLiveBlock(int next_position, int block_size) const = 0;

  // Most blocks one sequence of up to n_tokens tokens holds at once in this group's pool.
  virtual int BlocksPerSequence(int n_tokens, int block_size) const = 0;

  // Keys a query reads, its own included, for AttentionParams::window; 0: every earlier key.
  virtual int attention_window() const = 0;

  // Whether the disk tier may keep this group's blocks (KvGroupSpec::BlockBytes each, one file
  // per block and key): a block holds what its key determines alone, valid for any later
  // sequence that asks for that key: the K/V of fixed positions of a token prefix (full causal,
  // sliding window), the state after the prefix's last token (a recurrent state's checkpoint), or
  // the K/V of a whole encoder input (cross-attention, keyed by the input). A kind whose blocks
  // depend on more than their key says no, and an engine over it runs without the disk tier,
  // saying why.
  virtual bool disk_storable() const = 0;

  // Whether the group's blocks are rows of the sequences' BlockTables: logical block i holds the
  // decoder's positions [i * block_size, (i + 1) * block_size) and is keyed by the token prefix's
  // chain of keys (BlockManager::KeyOf), as a prefix hit and the disk tier's prefix restore walk
  // it. False: a sequence holds them apart, keyed by something else (an encoder input's
  // cross-attention blocks, BlockManager::AllocateInput and InputBlockKey).
  virtual bool indexed_by_position() const { return true; }

  // Whether each block holds a K and a V row per position (the attention kinds), or one state
  // per layer of the group's KvGroupSpec::state_floats floats (a recurrent state).
  virtual bool per_position() const { return true; }

  // Whether a row growing to end at logical block `last` takes a block at new entry `logical`
  // (<= last); false leaves it kNoBlock (a recurrent state's chunk interior, between its
  // checkpoints). Attention kinds take every one.
  virtual bool HoldsBlock(int logical, int last) const { return true; }
  // Most blocks a prefill chunk of n_tokens takes in this group's pool beyond BlocksPerSequence
  // (the engine's pool sizing); every block it touches for attention kinds.
  virtual int BlocksPerChunk(int n_tokens, int block_size) const {
    return (n_tokens + block_size - 1) / block_size;
  }
};

using KvCacheKindPtr = std::shared_ptr<const KvCacheKind>;

}  // namespace kvserve
