// Connects the in-memory prefix cache to the disk tier, group by group: a block evicted from one
// of the BlockManager's pools' LRU is written to the DiskTier (its K/V, or its recurrent state,
// out of the KvCache, under its prefix-cache key and its group), and before a prompt takes its
// cached prefix (BlockManager::AllocatePrefix) the blocks the deepest prefix hit needs that are
// no longer in memory are read back from disk into fresh blocks. What a hit of n blocks needs is
// the prefix cache's rule, per group: a group that keeps every block needs blocks 0 .. n - 1, any
// other group (a window, a recurrent state's checkpoint) those from its kind's FirstLiveBlock of
// the hit's end to n - 1. Only the groups indexed by position (BlockTable rows keyed by the
// prefix's chain) take part in a prefix hit: an encoder input's cross-attention group
// (KvCacheKind::indexed_by_position false) has no block in that chain; its blocks are written on
// eviction like any other group's, under their own keys (BlockManager::InputBlockKey), and read
// back by RestoreInput, the whole input or nothing, before the scheduler's AllocateInput looks.
// A failed write is a warning (once per kind of failure on stderr, all
// counted), a failed or invalid read a miss: the caller recomputes. A read-only tier
// (DiskTier::writable) is only read. The engine would hold one per KvCache; the three parts are
// borrowed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/block_manager.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"

namespace kvserve {

class KvDiskSpill {
 public:
  // Installs `manager`'s eviction hook; `tier` must hold, for each group, blocks of `cache`'s
  // BytesPerBlock of that group.
  KvDiskSpill(BlockManager& manager, KvCache& cache, DiskTier& tier);
  ~KvDiskSpill();  // removes the hook
  KvDiskSpill(const KvDiskSpill&) = delete;
  KvDiskSpill& operator=(const KvDiskSpill&) = delete;

  // Reads back from disk what the deepest prefix hit of `tokens` (as AllocatePrefix counts
  // them: at most (size - 1) / block_size blocks) needs beyond what is in memory: the deepest n
  // whose needed blocks are each in memory or on disk, within what each group's pool can take.
  // A read that fails (an invalid file) makes that block unavailable and the search goes on with
  // a shallower hit. Returns how many blocks the prefix hit grew by.
  int Restore(std::span<const int32_t> tokens, const std::string& salt);

  // An encoder input's blocks in `group` (a group not indexed by position): when every block
  // InputBlockKey(input_key, b), b < n_blocks, is in memory or on disk and the reads fit the
  // group's pool beside the ones in memory (made the most recently used first), reads the
  // missing ones back, so AllocateInput finds the whole input. True when it read some and the
  // input is then whole in memory; false when it read nothing (all in memory already, or some
  // block nowhere) or a read failed (an invalid file: the input is encoded again).
  bool RestoreInput(int group, const BlockKey& input_key, int n_blocks);

  // Writes every keyed block still in memory (used or cached), of every group, that the tier
  // lacks, as eviction would (a shutdown: what survives a restart). Returns how many were written.
  int Flush();

  uint64_t write_failures() const { return write_failures_; }

 private:
  // Where a group's block of a prefix is: unknown yet, nowhere, in memory (referenced, or cached
  // and evictable), on disk.
  enum class Where : int8_t { kUnknown, kNone, kUsed, kCached, kDisk };
  using WhereTable = std::vector<std::vector<Where>>;  // [n_groups][n_blocks of the prompt]

  bool OnEvict(int group, int32_t block, const BlockKey& key);  // true when written
  Where Locate(int group, int b, const std::vector<BlockKey>& keys, WhereTable& where) const;
  // The first block of `group` a hit of n blocks needs (0 for a group keeping every block).
  int FirstNeeded(int group, int n) const;
  // The deepest hit whose needed blocks are all somewhere and whose disk reads fit each pool.
  int DeepestHit(const std::vector<BlockKey>& keys, WhereTable& where) const;
  // Reads the disk blocks a hit of n blocks needs; false (that block marked kNone) on a failure.
  bool ReadBack(const std::vector<BlockKey>& keys, int n, WhereTable& where);
  // Reads `key`'s block of `group` from disk into a fresh cached block; false on a failure.
  bool ReadBlock(int group, const BlockKey& key);

  BlockManager& manager_;
  KvCache& cache_;
  DiskTier& tier_;
  std::vector<std::vector<uint8_t>> buffers_;  // [n_groups]: one block's bytes of each group
  int hook_id_ = -1;                           // manager_'s eviction hook
  uint64_t write_failures_ = 0;
  bool warned_ = false;
};

}  // namespace kvserve
