#include "kv/kv_disk_spill.h"

#include <cassert>
#include <cstdio>

namespace kvserve {

KvDiskSpill::KvDiskSpill(BlockManager& manager, KvCache& cache, DiskTier& tier)
    : manager_(manager), cache_(cache), tier_(tier), buffer_(tier.block_bytes()) {
  hook_id_ =
      manager_.AddEvictionHook([this](int32_t block, const BlockKey& key) { OnEvict(block, key); });
}

KvDiskSpill::~KvDiskSpill() { manager_.RemoveEvictionHook(hook_id_); }

bool KvDiskSpill::OnEvict(int32_t block, const BlockKey& key) {
  // A read-only tier was reported once at start-up (EngineCore::OpenDiskTier), not per block.
  if (!tier_.writable()) return false;
  if (tier_.Contains(key)) return false;  // already there (read back earlier, or another process)
  cache_.CopyBlockOut(block, buffer_);
  const Status written = tier_.Put(key, buffer_);
  if (written.ok()) return true;
  ++write_failures_;
  if (!warned_) {
    std::fprintf(stderr, "kvserve: warning: KV disk tier: %s (blocks are recomputed instead)\n",
                 written.message().c_str());
    warned_ = true;
  }
  return false;
}

int KvDiskSpill::Flush() {
  int written = 0;
  for (const auto& [block, key] : manager_.KeyedBlocks()) written += OnEvict(block, key) ? 1 : 0;
  return written;
}

int KvDiskSpill::Restore(std::span<const int32_t> tokens, const std::string& salt, int max_blocks) {
  if (tokens.empty()) return 0;
  const int block_size = manager_.block_size();
  const size_t n_full = (tokens.size() - 1) / block_size;
  int restored = 0;
  BlockKey key{};
  for (size_t b = 0; b < n_full && restored < max_blocks; ++b) {
    key = BlockManager::KeyOf(b ? &key : nullptr, salt, tokens.subspan(b * block_size, block_size));
    if (manager_.HasKey(key)) continue;
    const bool read = manager_.AdoptCached(key, [&](int32_t block) {
      if (!tier_.Get(key, buffer_)) return false;
      cache_.CopyBlockIn(block, buffer_);
      return true;
    });
    if (!read) break;
    ++restored;
  }
  return restored;
}

}  // namespace kvserve
