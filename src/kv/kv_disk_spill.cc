#include "kv/kv_disk_spill.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

namespace kvserve {

KvDiskSpill::KvDiskSpill(BlockManager& manager, KvCache& cache, DiskTier& tier)
    : manager_(manager), cache_(cache), tier_(tier) {
  assert(tier.n_groups() == manager.n_groups() && cache.n_groups() == manager.n_groups());
  for (int g = 0; g < tier.n_groups(); ++g) buffers_.emplace_back(tier.block_bytes(g));
  hook_id_ = manager_.AddEvictionHook(
      [this](int group, int32_t block, const BlockKey& key) { OnEvict(group, block, key); });
}

KvDiskSpill::~KvDiskSpill() { manager_.RemoveEvictionHook(hook_id_); }

bool KvDiskSpill::OnEvict(int group, int32_t block, const BlockKey& key) {
  // A read-only tier was reported once at start-up (EngineCore::OpenDiskTier), not per block.
  if (!tier_.writable()) return false;
  // Already there (read back earlier, or another process).
  if (tier_.Contains(key, group)) return false;
  std::vector<uint8_t>& buffer = buffers_[group];
  cache_.CopyBlockOut(group, block, buffer);
  const Status written = tier_.Put(key, buffer, group);
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
  for (int g = 0; g < manager_.n_groups(); ++g) {
    for (const auto& [block, key] : manager_.KeyedBlocks(g)) {
      written += OnEvict(g, block, key) ? 1 : 0;
    }
  }
  return written;
}

KvDiskSpill::Where KvDiskSpill::Locate(int group, int b, const std::vector<BlockKey>& keys,
                                       WhereTable& where) const {
  Where& w = where[group][b];
  if (w == Where::kUnknown) {
    w = manager_.IsEvictable(group, keys[b]) ? Where::kCached
        : manager_.HasKey(group, keys[b])    ? Where::kUsed
        : tier_.Contains(keys[b], group)     ? Where::kDisk
                                             : Where::kNone;
  }
  return w;
}

int KvDiskSpill::FirstNeeded(int group, int n) const {
  return std::min(n, manager_.FirstLiveBlock(group, n * manager_.block_size()));
}

int KvDiskSpill::DeepestHit(const std::vector<BlockKey>& keys, WhereTable& where) const {
  const int n_groups = manager_.n_groups();
  // The groups that need every block of the deepest hit bound it by their leading run.
  int n_max = static_cast<int>(keys.size());
  for (int g = 0; g < n_groups; ++g) {
    if (!manager_.indexed_by_position(g)) continue;  // an encoder input's: not in the chain
    if (FirstNeeded(g, n_max) != 0) continue;        // a window or a state: checked per hit below
    for (int b = 0; b < n_max; ++b) {
      if (Locate(g, b, keys, where) == Where::kNone) {
        n_max = b;
        break;
      }
    }
  }
  for (int n = n_max; n > 0; --n) {
    bool found = true;
    for (int g = 0; g < n_groups && found; ++g) {
      if (!manager_.indexed_by_position(g)) continue;
      // The reads must fit in the pool beside the needed cached blocks, which ReadBack keeps.
      int room = 0;
      for (int b = FirstNeeded(g, n); b < n && found; ++b) {
        const Where w = Locate(g, b, keys, where);
        found = w != Where::kNone;
        room += w == Where::kDisk || w == Where::kCached ? 1 : 0;
      }
      found = found && room <= manager_.available(g);
    }
    if (found) return n;
  }
  return 0;
}

bool KvDiskSpill::ReadBlock(int group, const BlockKey& key) {
  std::vector<uint8_t>& buffer = buffers_[group];
  return manager_.AdoptCached(group, key, [&](int32_t block) {
    if (!tier_.Get(key, buffer, group)) return false;
    cache_.CopyBlockIn(group, block, buffer);
    return true;
  });
}

bool KvDiskSpill::ReadBack(const std::vector<BlockKey>& keys, int n, WhereTable& where) {
  for (int g = 0; g < manager_.n_groups(); ++g) {
    if (!manager_.indexed_by_position(g)) continue;
    // The needed blocks already in memory become the most recently used: the reads evict others.
    for (int b = FirstNeeded(g, n); b < n; ++b) {
      if (where[g][b] == Where::kCached) manager_.Touch(g, keys[b]);
    }
    for (int b = FirstNeeded(g, n); b < n; ++b) {
      if (where[g][b] != Where::kDisk) continue;
      const bool read = ReadBlock(g, keys[b]);
      where[g][b] = read ? Where::kCached : Where::kNone;
      if (!read) return false;
    }
  }
  return true;
}

int KvDiskSpill::Restore(std::span<const int32_t> tokens, const std::string& salt) {
  if (tokens.empty()) return 0;
  const int block_size = manager_.block_size();
  const int before = manager_.CachedPrefixTokens(tokens, salt) / block_size;
  const size_t n_full = (tokens.size() - 1) / block_size;
  std::vector<BlockKey> keys;
  keys.reserve(n_full);
  for (size_t b = 0; b < n_full; ++b) {
    keys.push_back(BlockManager::KeyOf(b ? &keys.back() : nullptr, salt,
                                       tokens.subspan(b * block_size, block_size)));
  }
  WhereTable where(manager_.n_groups(), std::vector<Where>(n_full, Where::kUnknown));
  // Each failed read marks one block kNone, so this ends.
  for (;;) {
    const int n = DeepestHit(keys, where);
    if (n <= before || ReadBack(keys, n, where)) break;
  }
  return std::max(0, manager_.CachedPrefixTokens(tokens, salt) / block_size - before);
}

// All of the input or nothing: a partial input is no hit (AllocateInput takes fresh blocks and the
// encoder runs), so nothing is read unless every block can be had.
bool KvDiskSpill::RestoreInput(int group, const BlockKey& input_key, int n_blocks) {
  assert(!manager_.indexed_by_position(group));
  std::vector<BlockKey> keys;
  std::vector<Where> where;
  int n_disk = 0, n_cached = 0;
  for (int b = 0; b < n_blocks; ++b) {
    keys.push_back(BlockManager::InputBlockKey(input_key, b));
    where.push_back(manager_.IsEvictable(group, keys[b]) ? Where::kCached
                    : manager_.HasKey(group, keys[b])    ? Where::kUsed
                    : tier_.Contains(keys[b], group)     ? Where::kDisk
                                                         : Where::kNone);
    if (where[b] == Where::kNone) return false;
    n_disk += where[b] == Where::kDisk;
    n_cached += where[b] == Where::kCached;
  }
  // The reads must not evict the input's own cached blocks.
  if (n_disk == 0 || n_disk + n_cached > manager_.available(group)) return false;
  for (int b = 0; b < n_blocks; ++b) {
    if (where[b] == Where::kCached) manager_.Touch(group, keys[b]);
  }
  for (int b = 0; b < n_blocks; ++b) {
    if (where[b] == Where::kDisk && !ReadBlock(group, keys[b])) return false;
  }
  return true;
}

}  // namespace kvserve
