// Which KV block belongs to whom. Owns reference counts, the free list and the prefix cache
// (block key -> block, plus an LRU of unreferenced blocks that still hold reusable content).
// Never touches tensors: it hands out block ids; the model writes K/V into them.
//
// A block is in exactly one state:
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

#include "util/sha256.h"
#include "util/status.h"

namespace kvserve {

using BlockKey = Sha256Digest;

// A sequence's logical-to-physical block map. Owned by the sequence; changed only through
// BlockManager.
struct BlockTable {
  std::vector<int32_t> blocks;  // physical block of logical block i
  std::vector<BlockKey> keys;   // keys of the leading full blocks already registered
  bool empty() const { return blocks.empty(); }
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
  BlockManager(int n_blocks, int block_size, bool prefix_caching);

  int block_size() const { return block_size_; }
  int n_blocks() const { return static_cast<int>(refs_.size()); }
  // Blocks that can be handed out now (free + evictable cached).
  int available() const { return static_cast<int>(free_.size() + lru_.size()); }
  BlockManagerStats Stats() const;

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

  // For a table whose blocks all have keys (e.g. the head kept by a context shift): appends the
  // cached blocks that continue its chain over `tokens` (at most floor((tokens.size() - 1) /
  // block_size) blocks in all, as AllocatePrefix) and returns how many tokens the table holds
  // then. Counts no lookup. A table with an unkeyed block, or no prefix cache, is left as it is.
  int ExtendPrefix(BlockTable& table, std::span<const int32_t> tokens, const std::string& salt);

  // Counts a prefix-cache lookup of n_queried prompt tokens of which n_hit were cached.
  void RecordQuery(int n_queried, int n_hit) {
    queries_ += n_queried;
    hits_ += n_hit;
  }

  // Fresh blocks needed so the table can hold n_tokens tokens.
  int BlocksToHold(const BlockTable& table, int n_tokens) const;
  // Grows the table to hold n_tokens tokens; false (and no change) when blocks run out. With
  // evict false only free blocks are taken (speculative drafts must not evict cached prefixes).
  bool Grow(BlockTable& table, int n_tokens, bool evict = true);

  // Registers the table's full blocks among tokens[0..n_computed) in the prefix cache.
  void Commit(BlockTable& table, std::span<const int32_t> tokens, int n_computed,
              const std::string& salt);

  // Shrinks the table to the blocks that hold n_tokens tokens (speculative tokens rejected):
  // the blocks past them lose this reference; their keys (only full computed blocks have keys)
  // are kept only for blocks that stay.
  void Truncate(BlockTable& table, int n_tokens);

  // A second reference to the table's first n_blocks blocks (a pinned session).
  BlockTable Share(const BlockTable& table, int n_blocks);

  // Drops the table's references: unreferenced keyed blocks become cached (LRU, most recently
  // freed last), others free. Leaves the table empty.
  void Free(BlockTable& table);

  // Every block's state, indexed by block id; O(n_blocks), changes nothing.
  std::vector<BlockSnapshot> Snapshot() const;

  // Checks every invariant (states, counts, lists, map); for tests.
  Status CheckInvariants() const;

  // Called with a cached block and its key just before the block is evicted for reuse, while its
  // K/V still holds the key's content (the disk tier's write). Empty: none.
  void SetEvictionHook(std::function<void(int32_t block, const BlockKey& key)> hook) {
    on_evict_ = std::move(hook);
  }
  // The disk tier's read: whether a block of `key` is in memory (used or cached), and taking a
  // fresh block that `fill` loads with the key's K/V, kept as a cached block of `key` (the most
  // recently used) when `fill` returns true, else freed. False when no block is available.
  bool HasKey(const BlockKey& key) const { return cached_.count(key) != 0; }
  bool AdoptCached(const BlockKey& key, const std::function<bool(int32_t block)>& fill);
  // Every block that has a key (used or cached) with its key, by block id (the disk tier's
  // write at shutdown).
  std::vector<std::pair<int32_t, BlockKey>> KeyedBlocks() const;

 private:
  struct KeyHash {
    size_t operator()(const BlockKey& key) const;
  };
  int32_t TakeFreshBlock();  // from the free list, else evicts the least recently used cached
  void Reference(int32_t block);
  void Release(int32_t block);  // drops one reference

  int block_size_;
  bool prefix_caching_;
  std::vector<int32_t> refs_;
  std::vector<bool> has_key_;
  std::vector<BlockKey> key_of_;
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // valid while the block is cached
  std::vector<bool> in_lru_;
  std::vector<int32_t> free_;  // stack of free blocks
  std::list<int32_t> lru_;     // cached blocks, least recently used first
  std::unordered_map<BlockKey, int32_t, KeyHash> cached_;  // key -> block (used or cached)
  std::vector<int32_t> chain_index_;                       // valid while the block has a key
  std::vector<uint32_t> hits_of_;  // AllocatePrefix reuses since the key was set
  uint64_t queries_ = 0;
  uint64_t hits_ = 0;
  std::function<void(int32_t, const BlockKey&)> on_evict_;
};

}  // namespace kvserve
