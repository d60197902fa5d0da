// Which KV block belongs to whom. Owns, per KV layer group (kv_spec.h), one pool of blocks with
// its reference counts, free list and prefix cache (block key -> block, plus an LRU of
// unreferenced blocks that still hold reusable content). Never touches tensors: it hands out
// block ids; the model writes K/V into them.
//
// Layer groups: a sequence's BlockTable holds one row of block ids per group, all indexed by the
// same logical block (tokens [i * block_size, (i + 1) * block_size)). A full group's row holds
// every block of the sequence; a sliding-window group's row releases the blocks wholly before
// the window of the next position to compute (SlideWindows, at block granularity): those entries
// become kNoBlock,
// which attention never reads, and the pool gets the block back (cached while it has a key).
// Prefix keys are per token chain and the same in every group; a prefix hit (AllocatePrefix)
// needs every full group's blocks of the whole prefix and every window group's blocks of the
// last window before the first token it leaves to compute.
//
// A block of a pool is in exactly one state:
//   free   - ref 0, no key, on the free list;
//   cached - ref 0, has a key, on the LRU list (content kept until evicted);
//   used   - ref > 0 (may have a key, then other sequences can share it).
// Only full blocks get keys and are shared; a sequence writes only into its last, partial block,
// which is never shared, so no copy-on-write is needed.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/full_causal_kind.h"
#include "kv/kv_cache_kind.h"
#include "util/sha256.h"
#include "util/status.h"

namespace kvserve {

using BlockKey = Sha256Digest;

// An entry of a window group's row whose block slid out of the window (never read).
inline constexpr int32_t kNoBlock = -1;

// A sequence's logical-to-physical block map, one row per layer group. Owned by the sequence;
// changed only through BlockManager.
struct BlockTable {
  // groups[g][i]: the physical block of logical block i (tokens [i * block_size, (i + 1) *
  // block_size)) in group g's pool, or kNoBlock where the group's kind released it; every row
  // has the same length. [n_groups][n_logical]; no rows until BlockManager first fills it.
  std::vector<std::vector<int32_t>> groups;
  std::vector<BlockKey> keys;  // keys of the leading full blocks already registered

  int n_logical() const { return groups.empty() ? 0 : static_cast<int>(groups.front().size()); }
  bool empty() const { return n_logical() == 0; }
  const std::vector<int32_t>& group(size_t g) const { return groups[g]; }
  std::vector<int32_t>& group(size_t g) { return groups[g]; }
  // Blocks referenced, over every group (kNoBlock entries not counted).
  int held() const;
};

// One group's pool: how many blocks, and the group's cache kind (which blocks a sequence keeps).
struct BlockPoolSpec {
  int n_blocks = 0;
  KvCacheKindPtr kind = FullCausalKind::Make();
};

struct BlockManagerStats {
  int total = 0;
  int used = 0;
  int cached = 0;
  int free = 0;
  uint64_t prefix_queries_tokens = 0;  // prompt tokens looked up in the prefix cache
  uint64_t prefix_hits_tokens = 0;     // of those, found cached
};

// One block of the pool as BlockManager::Snapshot() sees it (the web UI's block map).
struct BlockSnapshot {
  enum class State : uint8_t { kFree, kCached, kUsed };
  State state = State::kFree;
  int32_t refs = 0;
  int32_t lru_rank = -1;     // cached: 0 = evicted next, 1 = after it, ...; otherwise -1
  int32_t chain_index = -1;  // keyed: logical block i of its prefix chain (tokens [i*bs, (i+1)*bs))
  uint32_t hits = 0;         // prefix-cache reuses since its content was registered
};

class BlockManager {
 public:
  // One full group of n_blocks blocks.
  BlockManager(int n_blocks, int block_size, bool prefix_caching);
  // One pool per layer group, in KvSpec::groups order.
  BlockManager(std::vector<BlockPoolSpec> pools, int block_size, bool prefix_caching);

  int block_size() const { return block_size_; }
  // Whether some group's blocks hold recurrent states (kv/recurrent_state_kind.h): a sequence's
  // state there cannot be truncated, only recomputed from a block boundary's checkpoint.
  bool holds_states() const {
    for (const Pool& pool : pools_) {
      if (!pool.kind->per_position()) return true;
    }
    return false;
  }
  int n_groups() const { return static_cast<int>(pools_.size()); }
  // Blocks of every pool together; of one group's pool.
  int n_blocks() const;
  int n_blocks(int group) const { return static_cast<int>(pools_[group].refs.size()); }
  // Blocks of a group's pool that can be handed out now (free + evictable cached); the disk
  // tier's bound on what it reads back.
  int available(int group = 0) const { return pools_[group].available(); }
  // Counts over every pool; of one group's pool.
  BlockManagerStats Stats() const;
  BlockManagerStats Stats(int group) const;

  // Key of a full block: SHA-256 over (parent key, salt, the block's token ids).
  static BlockKey KeyOf(const BlockKey* parent, const std::string& salt,
                        std::span<const int32_t> block_tokens);

  // Leading tokens of `tokens` found in the prefix cache as whole blocks, without changing
  // anything. At most floor((tokens.size() - 1) / block_size) blocks count, so the last token is
  // always computed (its logits are needed).
  int CachedPrefixTokens(std::span<const int32_t> tokens, const std::string& salt) const;

  // For an empty table: takes the cached prefix blocks of `tokens` (as CachedPrefixTokens) and
  // returns how many tokens they hold. (RecordQuery counts the lookup, once per request.)
  int AllocatePrefix(BlockTable& table, std::span<const int32_t> tokens, const std::string& salt);

  // For a table cut to a head (a context shift): first shrinks it to its leading blocks whose
  // window every window group still holds (a window may have slid past the head), then, where
  // all its blocks have keys and the prefix cache is on, appends the cached blocks that continue
  // its chain over `tokens` (at most floor((tokens.size() - 1) / block_size) blocks in all, the
  // window groups' within the last window, as AllocatePrefix). Returns how many tokens the table
  // holds then. Counts no lookup.
  int ExtendPrefix(BlockTable& table, std::span<const int32_t> tokens, const std::string& salt);

  // Counts a prefix-cache lookup of n_queried prompt tokens of which n_hit were cached.
  void RecordQuery(int n_queried, int n_hit) {
    queries_ += n_queried;
    hits_ += n_hit;
  }

  // Fresh blocks needed (in each group) so the table can hold n_tokens tokens.
  int BlocksToHold(const BlockTable& table, int n_tokens) const;
  // Grows the table to hold n_tokens tokens; false (and no change) when some group's blocks run
  // out. With evict false only free blocks are taken (speculative drafts must not evict cached
  // prefixes). A group's kind may leave new entries kNoBlock (KvCacheKind::HoldsBlock).
  bool Grow(BlockTable& table, int n_tokens, bool evict = true);
  // The last block boundary at or below n_tokens after which every recurrent-state group holds
  // its state (the entry of the block before it is a block); 0 when none.
  int LastHeldBoundary(const BlockTable& table, int n_tokens) const;

  // Window groups: releases the table's blocks wholly before the window of the last block
  // boundary at or before `next_position` (the next token to compute; B = next_position rounded
  // down to a multiple of block_size): logical blocks below max(0, B - window + 1) / block_size
  // become kNoBlock. Keeping B's window (not next_position's) costs no block at the bound
  // (KvGroupSpec::BlocksPerSequence) and leaves a prefix hit of this sequence's whole blocks its
  // window. Full groups: no change. Positions below next_position are never recomputed into this
  // table afterwards.
  void SlideWindows(BlockTable& table, int next_position);
  // First logical block a group keeps for a sequence whose next position is `next_position`
  // (its kind's rule; 0 for a full group).
  int FirstLiveBlock(int group, int next_position) const {
    return pools_[group].kind->FirstLiveBlock(next_position, block_size_);
  }
  // Whether a group's blocks are rows of the BlockTables, keyed by the token prefix's chain
  // (KvCacheKind::indexed_by_position); false for an encoder input's cross-attention group.
  bool indexed_by_position(int group) const { return pools_[group].kind->indexed_by_position(); }

  // Registers the table's full blocks among tokens[0..n_computed) in the prefix cache.
  void Commit(BlockTable& table, std::span<const int32_t> tokens, int n_computed,
              const std::string& salt);

  // Shrinks the table to the blocks that hold n_tokens tokens (speculative tokens rejected):
  // the blocks past them lose this reference; their keys (only full computed blocks have keys)
  // are kept only for blocks that stay.
  void Truncate(BlockTable& table, int n_tokens);

  // A second reference to the table's first n_blocks logical blocks, in every group (a pinned
  // session; released window entries stay kNoBlock).
  BlockTable Share(const BlockTable& table, int n_blocks);

  // Drops the table's references: unreferenced keyed blocks become cached (LRU, most recently
  // freed last), others free. Leaves the table empty.
  void Free(BlockTable& table);

  // Encoder inputs (an encoder-decoder's cross-attention group, kv/cross_attention_kind.h): a
  // sequence holds the blocks of its whole input apart from its BlockTable (whose row of that
  // group stays kNoBlock), all keyed by the input's key, since they hold what the whole input
  // determines. InputKey: SHA-256 over (salt, the input's tokens).
  static BlockKey InputKey(std::span<const int32_t> input, const std::string& salt);
  // The key of block b (positions [b * block_size, (b + 1) * block_size) of the input) of the
  // input of `key` (InputKey): SHA-256 over (key, b); how the prefix cache and the disk tier
  // name it.
  static BlockKey InputBlockKey(const BlockKey& key, int b);
  // For an empty `blocks`: n_blocks blocks of the group's pool for the input of `key`: its cached
  // blocks when every one of them is (then *hit is set: they hold its encoding; the lookup of
  // n_input_tokens is counted), else fresh ones. False (and nothing taken) when the pool lacks
  // them.
  bool AllocateInput(int group, const BlockKey& key, int n_blocks, int n_input_tokens,
                     std::vector<int32_t>& blocks, bool* hit);
  // Registers blocks that now hold the input's encoding in the prefix cache (no change without
  // prefix caching, or for blocks another sequence registered first).
  void CommitInput(int group, const BlockKey& key, std::span<const int32_t> blocks);
  // Drops the references of AllocateInput's blocks (keyed ones become cached). Empties `blocks`.
  void FreeInput(int group, std::vector<int32_t>& blocks);

  // Every block's state in one group's pool, indexed by block id; O(n_blocks), changes nothing.
  std::vector<BlockSnapshot> Snapshot(int group = 0) const;

  // Checks every invariant of every pool (states, counts, lists, map); for tests.
  Status CheckInvariants() const;

  // Hooks on every group's pool (the disk tier's write; history drafting's forgetting, which
  // watches group 0): each is called with the group, a cached block and its key just before the
  // block is evicted for reuse, while its K/V (or state) still holds the key's content. Add
  // returns an id for Remove. Called in the order added.
  using EvictionHook = std::function<void(int group, int32_t block, const BlockKey& key)>;
  int AddEvictionHook(EvictionHook hook);
  void RemoveEvictionHook(int id);
  // The disk tier's read: whether a group's block of `key` is in memory (used or cached), and
  // taking a fresh block of the group that `fill` loads with the key's K/V (or state), kept as a
  // cached block of `key` (the most recently used) when `fill` returns true, else freed. False
  // when no block is available.
  bool HasKey(int group, const BlockKey& key) const { return pools_[group].cached.count(key) != 0; }
  // Whether that block is cached, unreferenced (evictable: it counts in available()).
  bool IsEvictable(int group, const BlockKey& key) const {
    const auto it = pools_[group].cached.find(key);
    return it != pools_[group].cached.end() && pools_[group].in_lru[it->second];
  }
  bool AdoptCached(int group, const BlockKey& key, const std::function<bool(int32_t block)>& fill);
  // Makes a cached (unreferenced) block of `key` the group's most recently used, so that taking
  // fresh blocks evicts others first (the disk tier keeps the in-memory part of the prefix it
  // completes). No change for a used block or an unknown key.
  void Touch(int group, const BlockKey& key);
  // Every block of a group's pool that has a key (used or cached) with its key, by block id (the
  // disk tier's write at shutdown).
  std::vector<std::pair<int32_t, BlockKey>> KeyedBlocks(int group) const;

 private:
  struct KeyHash {
    size_t operator()(const BlockKey& key) const;
  };
  // One group's blocks: states, lists and its part of the prefix cache.
  struct Pool {
    explicit Pool(const BlockPoolSpec& spec);
    int available() const { return static_cast<int>(free.size() + lru.size()); }
    KvCacheKindPtr kind;
    std::vector<int32_t> refs;
    std::vector<bool> has_key;
    std::vector<BlockKey> key_of;
    std::vector<std::list<int32_t>::iterator> lru_pos;  // valid while the block is cached
    std::vector<bool> in_lru;
    std::vector<int32_t> free;  // stack of free blocks
    std::list<int32_t> lru;     // cached blocks, least recently used first
    std::unordered_map<BlockKey, int32_t, KeyHash> cached;  // key -> block (used or cached)
    std::vector<int32_t> chain_index;                       // valid while the block has a key
    std::vector<uint32_t> hits_of;  // AllocatePrefix reuses since the key was set
  };
  // From the pool's free list, else evicts its least recently used cached block.
  int32_t TakeFreshBlock(size_t group);
  void Reference(Pool& pool, int32_t block);
  void Release(Pool& pool, int32_t block);  // drops one reference
  // Appends to `keys` (the keys of tokens' leading blocks so far) the keys of the blocks that
  // follow while every full group caches them, up to floor((tokens.size() - 1) / block_size).
  // tokens: not empty.
  void ExtendKeyChain(std::span<const int32_t> tokens, const std::string& salt,
                      std::vector<BlockKey>& keys) const;
  // Keys of the leading full blocks of `tokens` that may count as a prefix hit, and of those the
  // most blocks that every group holds as a hit needs them (see the header comment).
  int PrefixHitBlocks(std::span<const int32_t> tokens, const std::string& salt,
                      std::vector<BlockKey>& keys) const;
  Status CheckPool(size_t group) const;

  int block_size_;
  bool prefix_caching_;
  std::vector<Pool> pools_;  // [n_groups]
  uint64_t queries_ = 0;
  uint64_t hits_ = 0;
  std::vector<std::pair<int, EvictionHook>> on_evict_;  // (id, hook)
  int next_hook_id_ = 0;
};

}  // namespace kvserve
