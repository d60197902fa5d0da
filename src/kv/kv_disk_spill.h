// Connects the in-memory prefix cache to the disk tier: a block evicted from the BlockManager's
// LRU is written to the DiskTier (its K/V out of the KvCache, under its prefix-cache key), and
// before a prompt takes its cached prefix (BlockManager::AllocatePrefix) the leading full blocks
// that are no longer in memory are read back from disk into fresh blocks. A failed write is a
// warning (once per kind of failure on stderr, all counted), a failed or invalid read a miss:
// the caller recomputes. A read-only tier (DiskTier::writable) is only read. The engine would hold
// one per KvCache; the three parts are borrowed.
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
  // Installs `manager`'s eviction hook; `tier` must hold blocks of `cache`'s BytesPerBlock.
  KvDiskSpill(BlockManager& manager, KvCache& cache, DiskTier& tier);
  ~KvDiskSpill();  // removes the hook
  KvDiskSpill(const KvDiskSpill&) = delete;
  KvDiskSpill& operator=(const KvDiskSpill&) = delete;

  // Reads back from disk the leading full blocks of `tokens` (as AllocatePrefix counts them: at
  // most (size - 1) / block_size) that are not in memory, in order, stopping at the first that
  // is on neither; at most `max_blocks` of them. Returns how many were read.
  int Restore(std::span<const int32_t> tokens, const std::string& salt, int max_blocks);

  // Writes every keyed block still in memory (used or cached) that the tier lacks, as eviction
  // would (a shutdown: what survives a restart). Returns how many were written.
  int Flush();

  uint64_t write_failures() const { return write_failures_; }

 private:
  bool OnEvict(int32_t block, const BlockKey& key);  // true when written

  BlockManager& manager_;
  KvCache& cache_;
  DiskTier& tier_;
  std::vector<uint8_t> buffer_;  // one block's bytes
  int hook_id_ = -1;             // manager_'s eviction hook
  uint64_t write_failures_ = 0;
  bool warned_ = false;
};

}  // namespace kvserve
