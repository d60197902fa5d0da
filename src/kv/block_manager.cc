#include "kv/block_manager.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace kvserve {

int BlockTable::held() const {
  int n = 0;
  for (const std::vector<int32_t>& row : groups) {
    for (int32_t block : row) n += block != kNoBlock;
  }
  return n;
}

size_t BlockManager::KeyHash::operator()(const BlockKey& key) const {
  size_t h;
  std::memcpy(&h, key.data(), sizeof(h));
  return h;
}

BlockManager::Pool::Pool(const BlockPoolSpec& spec)
    : kind(spec.kind),
      refs(spec.n_blocks, 0),
      has_key(spec.n_blocks, false),
      key_of(spec.n_blocks),
      lru_pos(spec.n_blocks),
      in_lru(spec.n_blocks, false),
      chain_index(spec.n_blocks, -1),
      hits_of(spec.n_blocks, 0) {
  free.reserve(spec.n_blocks);
  for (int32_t b = spec.n_blocks - 1; b >= 0; --b) free.push_back(b);  // hand out 0, 1, 2, ...
}

BlockManager::BlockManager(int n_blocks, int block_size, bool prefix_caching)
    : BlockManager(std::vector<BlockPoolSpec>{{.n_blocks = n_blocks}}, block_size, prefix_caching) {
}

BlockManager::BlockManager(std::vector<BlockPoolSpec> pools, int block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching) {
  assert(!pools.empty());
  for (const BlockPoolSpec& spec : pools) pools_.emplace_back(spec);
}

int BlockManager::n_blocks() const {
  int n = 0;
  for (const Pool& pool : pools_) n += static_cast<int>(pool.refs.size());
  return n;
}

BlockManagerStats BlockManager::Stats(int group) const {
  const Pool& pool = pools_[group];
  BlockManagerStats s;
  s.total = static_cast<int>(pool.refs.size());
  s.free = static_cast<int>(pool.free.size());
  s.cached = static_cast<int>(pool.lru.size());
  s.used = s.total - s.free - s.cached;
  s.prefix_queries_tokens = queries_;
  s.prefix_hits_tokens = hits_;
  return s;
}

BlockManagerStats BlockManager::Stats() const {
  BlockManagerStats s = Stats(0);
  for (int g = 1; g < n_groups(); ++g) {
    const BlockManagerStats p = Stats(g);
    s.total += p.total;
    s.free += p.free;
    s.cached += p.cached;
    s.used += p.used;
  }
  return s;
}

BlockKey BlockManager::KeyOf(const BlockKey* parent, const std::string& salt,
                             std::span<const int32_t> block_tokens) {
  Sha256 hasher;
  const uint8_t has_parent = parent != nullptr;
  hasher.Update(&has_parent, 1);
  if (parent) hasher.Update(parent->data(), parent->size());
  const uint64_t salt_size = salt.size();
  hasher.Update(&salt_size, sizeof(salt_size));
  hasher.Update(salt.data(), salt.size());
  hasher.Update(block_tokens.data(), block_tokens.size_bytes());
  return hasher.Finish();
}

void BlockManager::ExtendKeyChain(std::span<const int32_t> tokens, const std::string& salt,
                                  std::vector<BlockKey>& keys) const {
  const size_t max_blocks = (tokens.size() - 1) / block_size_;
  for (size_t b = keys.size(); b < max_blocks; ++b) {
    const BlockKey key =
        KeyOf(b ? &keys.back() : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    const bool in_full_groups = std::all_of(pools_.begin(), pools_.end(), [&](const Pool& pool) {
      return !pool.kind->keeps_every_block() || pool.cached.count(key) != 0;
    });
    if (!in_full_groups) return;
    keys.push_back(key);
  }
}

// The full groups bound the hit: their blocks must hold the whole prefix. Window groups need
// only the blocks of the window before the hit's end, so a shorter hit may succeed where a
// longer one does not (the longer one's window slid past blocks that were evicted).
int BlockManager::PrefixHitBlocks(std::span<const int32_t> tokens, const std::string& salt,
                                  std::vector<BlockKey>& keys) const {
  keys.clear();
  if (!prefix_caching_ || tokens.empty()) return 0;
  ExtendKeyChain(tokens, salt, keys);
  for (int n = static_cast<int>(keys.size()); n > 0; --n) {
    bool whole = true;
    for (int g = 0; g < n_groups() && whole; ++g) {
      if (pools_[g].kind->keeps_every_block()) continue;
      for (int b = FirstLiveBlock(g, n * block_size_); b < n && whole; ++b) {
        whole = pools_[g].cached.count(keys[b]) != 0;
      }
    }
    if (whole) return n;
  }
  return 0;
}

int BlockManager::CachedPrefixTokens(std::span<const int32_t> tokens,
                                     const std::string& salt) const {
  std::vector<BlockKey> keys;
  return PrefixHitBlocks(tokens, salt, keys) * block_size_;
}

void BlockManager::Reference(Pool& pool, int32_t block) {
  if (pool.in_lru[block]) {
    pool.lru.erase(pool.lru_pos[block]);
    pool.in_lru[block] = false;
  }
  ++pool.refs[block];
}

int BlockManager::AllocatePrefix(BlockTable& table, std::span<const int32_t> tokens,
                                 const std::string& salt) {
  assert(table.empty());
  table.groups.resize(pools_.size());
  std::vector<BlockKey> keys;
  const int n = PrefixHitBlocks(tokens, salt, keys);
  if (n == 0) return 0;
  keys.resize(n);
  for (size_t g = 0; g < pools_.size(); ++g) {
    Pool& pool = pools_[g];
    std::vector<int32_t>& row = table.group(g);
    const int first = FirstLiveBlock(static_cast<int>(g), n * block_size_);
    row.assign(first, kNoBlock);
    for (int b = first; b < n; ++b) {
      const int32_t block = pool.cached.at(keys[b]);
      Reference(pool, block);
      ++pool.hits_of[block];
      row.push_back(block);
    }
  }
  table.keys = std::move(keys);
  return n * block_size_;
}

int BlockManager::ExtendPrefix(BlockTable& table, std::span<const int32_t> tokens,
                               const std::string& salt) {
  table.groups.resize(pools_.size());
  // Window rows may have released blocks inside the window before the table's end (a shift's
  // head): keep only the leading blocks whose window is still held.
  auto window_held = [&](int n, auto&& has) {
    for (int g = 0; g < n_groups(); ++g) {
      if (pools_[g].kind->keeps_every_block()) continue;
      for (int b = FirstLiveBlock(g, n * block_size_); b < n; ++b) {
        if (!has(g, b)) return false;
      }
    }
    return true;
  };
  int held = table.n_logical();
  while (held > 0 &&
         !window_held(held, [&](int g, int b) { return table.group(g)[b] != kNoBlock; })) {
    --held;
  }
  Truncate(table, held * block_size_);
  if (!prefix_caching_ || tokens.empty() ||
      static_cast<int>(table.keys.size()) != table.n_logical()) {
    return held * block_size_;
  }
  std::vector<BlockKey> keys(table.keys);
  ExtendKeyChain(tokens, salt, keys);
  auto has = [&](int g, int b) {
    return b < held ? table.group(g)[b] != kNoBlock : pools_[g].cached.count(keys[b]) != 0;
  };
  int n = static_cast<int>(keys.size());
  while (n > held && !window_held(n, has)) --n;
  for (size_t g = 0; g < pools_.size(); ++g) {
    Pool& pool = pools_[g];
    std::vector<int32_t>& row = table.group(g);
    const int first = FirstLiveBlock(static_cast<int>(g), n * block_size_);
    for (int b = 0; b < std::min(first, held); ++b) {  // no longer in the window: released
      if (row[b] != kNoBlock) Release(pool, row[b]);
      row[b] = kNoBlock;
    }
    for (int b = held; b < n; ++b) {
      if (b < first) {
        row.push_back(kNoBlock);
        continue;
      }
      const int32_t block = pool.cached.at(keys[b]);
      Reference(pool, block);
      ++pool.hits_of[block];
      row.push_back(block);
    }
  }
  keys.resize(n);
  table.keys = std::move(keys);
  return n * block_size_;
}

int BlockManager::BlocksToHold(const BlockTable& table, int n_tokens) const {
  const int needed = (n_tokens + block_size_ - 1) / block_size_;
  return std::max(0, needed - table.n_logical());
}

int32_t BlockManager::TakeFreshBlock(size_t group) {
  Pool& pool = pools_[group];
  int32_t block;
  if (!pool.free.empty()) {
    block = pool.free.back();
    pool.free.pop_back();
  } else {
    assert(!pool.lru.empty());
    block = pool.lru.front();
    for (const auto& [id, hook] : on_evict_) {
      hook(static_cast<int>(group), block, pool.key_of[block]);
    }
    pool.lru.pop_front();
    pool.in_lru[block] = false;
    pool.cached.erase(pool.key_of[block]);
    pool.has_key[block] = false;
  }
  pool.refs[block] = 1;
  return block;
}

bool BlockManager::AdoptCached(int group, const BlockKey& key,
                               const std::function<bool(int32_t block)>& fill) {
  Pool& pool = pools_[group];
  if (!prefix_caching_ || pool.available() == 0 || HasKey(group, key)) return false;
  const int32_t block = TakeFreshBlock(group);
  pool.refs[block] = 0;
  if (!fill(block)) {
    pool.free.push_back(block);
    return false;
  }
  pool.has_key[block] = true;
  pool.key_of[block] = key;
  pool.cached[key] = block;
  pool.lru.push_back(block);
  pool.lru_pos[block] = std::prev(pool.lru.end());
  pool.in_lru[block] = true;
  return true;
}

void BlockManager::Touch(int group, const BlockKey& key) {
  Pool& pool = pools_[group];
  const auto it = pool.cached.find(key);
  if (it == pool.cached.end() || !pool.in_lru[it->second]) return;
  pool.lru.splice(pool.lru.end(), pool.lru, pool.lru_pos[it->second]);
}

bool BlockManager::Grow(BlockTable& table, int n_tokens, bool evict) {
  const int needed = BlocksToHold(table, n_tokens);
  if (needed == 0) return true;
  const int first = table.n_logical(), last = first + needed - 1;
  for (const Pool& pool : pools_) {
    int fresh = 0;
    for (int b = first; b <= last; ++b) fresh += pool.kind->HoldsBlock(b, last);
    if (fresh > (evict ? pool.available() : static_cast<int>(pool.free.size()))) return false;
  }
  table.groups.resize(pools_.size());
  for (size_t g = 0; g < pools_.size(); ++g) {
    for (int b = first; b <= last; ++b) {
      table.group(g).push_back(pools_[g].kind->HoldsBlock(b, last) ? TakeFreshBlock(g) : kNoBlock);
    }
  }
  return true;
}

int BlockManager::LastHeldBoundary(const BlockTable& table, int n_tokens) const {
  int boundary = std::min(n_tokens, table.n_logical() * block_size_) / block_size_ * block_size_;
  for (; boundary > 0; boundary -= block_size_) {
    const int b = boundary / block_size_ - 1;
    bool held = true;
    for (size_t g = 0; g < pools_.size(); ++g) {
      if (!pools_[g].kind->per_position()) held = held && table.group(g)[b] != kNoBlock;
    }
    if (held) return boundary;
  }
  return 0;
}

void BlockManager::SlideWindows(BlockTable& table, int next_position) {
  for (size_t g = 0; g < pools_.size(); ++g) {
    if (pools_[g].kind->keeps_every_block()) continue;
    std::vector<int32_t>& row = table.group(g);
    // The window of the last block boundary stays: a prefix hit on this sequence's blocks (a
    // whole number of blocks, a session's next turn) needs it. A window's kept entries are
    // contiguous: walk down from the first kept one to the last released. A recurrent state's
    // row has holes (a chunk's blocks between checkpoints, HoldsBlock), so its walk goes on past
    // them to the row's start.
    const bool holes = !pools_[g].kind->per_position();
    const int boundary = next_position / block_size_ * block_size_;
    int b =
        std::min(FirstLiveBlock(static_cast<int>(g), boundary), static_cast<int>(row.size())) - 1;
    for (; b >= 0 && (holes || row[b] != kNoBlock); --b) {
      if (row[b] == kNoBlock) continue;
      Release(pools_[g], row[b]);
      row[b] = kNoBlock;
    }
  }
}

void BlockManager::Commit(BlockTable& table, std::span<const int32_t> tokens, int n_computed,
                          const std::string& salt) {
  if (!prefix_caching_) return;
  const size_t full = std::min<size_t>(n_computed / block_size_, table.n_logical());
  for (size_t b = table.keys.size(); b < full; ++b) {
    const BlockKey key =
        KeyOf(b ? &table.keys.back() : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    table.keys.push_back(key);
    for (size_t g = 0; g < pools_.size(); ++g) {
      Pool& pool = pools_[g];
      const int32_t block = table.group(g)[b];
      // (Only blocks taken from the cache have keys already; a window may have slid past it.)
      if (block == kNoBlock || pool.has_key[block]) continue;
      // Another sequence may have registered the same content first; keep that one in the map.
      if (pool.cached.emplace(key, block).second) {
        pool.has_key[block] = true;
        pool.key_of[block] = key;
        pool.chain_index[block] = static_cast<int32_t>(b);
        pool.hits_of[block] = 0;
      }
    }
  }
}

BlockTable BlockManager::Share(const BlockTable& table, int n_blocks) {
  BlockTable shared;
  shared.groups.resize(table.groups.size());
  n_blocks = std::min<int>(n_blocks, table.n_logical());
  for (size_t g = 0; g < table.groups.size(); ++g) {
    for (int b = 0; b < n_blocks; ++b) {
      const int32_t block = table.group(g)[b];
      if (block != kNoBlock) Reference(pools_[g], block);
      shared.group(g).push_back(block);
    }
  }
  shared.keys.assign(table.keys.begin(),
                     table.keys.begin() + std::min<size_t>(n_blocks, table.keys.size()));
  return shared;
}

void BlockManager::Release(Pool& pool, int32_t block) {
  assert(pool.refs[block] > 0);
  if (--pool.refs[block] > 0) return;
  if (pool.has_key[block]) {
    pool.lru.push_back(block);
    pool.lru_pos[block] = std::prev(pool.lru.end());
    pool.in_lru[block] = true;
  } else {
    pool.free.push_back(block);
  }
}

void BlockManager::Free(BlockTable& table) {
  // Release the tail first so that, under LRU eviction, a sequence's early (most shareable)
  // blocks are evicted last.
  for (size_t g = 0; g < table.groups.size(); ++g) {
    std::vector<int32_t>& row = table.group(g);
    for (auto it = row.rbegin(); it != row.rend(); ++it) {
      if (*it != kNoBlock) Release(pools_[g], *it);
    }
    row.clear();
  }
  table.keys.clear();
}

BlockKey BlockManager::InputKey(std::span<const int32_t> input, const std::string& salt) {
  return KeyOf(nullptr, "encoder input\n" + salt, input);
}

BlockKey BlockManager::InputBlockKey(const BlockKey& key, int b) {
  const int32_t index = b;
  return KeyOf(&key, "", std::span(&index, 1));
}

bool BlockManager::AllocateInput(int group, const BlockKey& key, int n_blocks, int n_input_tokens,
                                 std::vector<int32_t>& blocks, bool* hit) {
  assert(blocks.empty());
  Pool& pool = pools_[group];
  *hit = prefix_caching_;
  for (int b = 0; b < n_blocks && *hit; ++b) *hit = pool.cached.count(InputBlockKey(key, b)) != 0;
  if (*hit) {
    for (int b = 0; b < n_blocks; ++b) {
      const int32_t block = pool.cached.at(InputBlockKey(key, b));
      Reference(pool, block);
      ++pool.hits_of[block];
      blocks.push_back(block);
    }
  } else {
    if (n_blocks > pool.available()) return false;
    for (int b = 0; b < n_blocks; ++b) blocks.push_back(TakeFreshBlock(group));
  }
  if (prefix_caching_) RecordQuery(n_input_tokens, *hit ? n_input_tokens : 0);
  return true;
}

void BlockManager::CommitInput(int group, const BlockKey& key, std::span<const int32_t> blocks) {
  if (!prefix_caching_) return;
  Pool& pool = pools_[group];
  for (size_t b = 0; b < blocks.size(); ++b) {
    const int32_t block = blocks[b];
    if (pool.has_key[block]) continue;
    const BlockKey block_key = InputBlockKey(key, static_cast<int>(b));
    if (pool.cached.emplace(block_key, block).second) {
      pool.has_key[block] = true;
      pool.key_of[block] = block_key;
      pool.chain_index[block] = static_cast<int32_t>(b);
      pool.hits_of[block] = 0;
    }
  }
}

void BlockManager::FreeInput(int group, std::vector<int32_t>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) Release(pools_[group], *it);
  blocks.clear();
}

std::vector<std::pair<int32_t, BlockKey>> BlockManager::KeyedBlocks(int group) const {
  const Pool& pool = pools_[group];
  std::vector<std::pair<int32_t, BlockKey>> out;
  for (size_t b = 0; b < pool.refs.size(); ++b) {
    if (pool.has_key[b]) out.emplace_back(static_cast<int32_t>(b), pool.key_of[b]);
  }
  return out;
}

std::vector<BlockSnapshot> BlockManager::Snapshot(int group) const {
  const Pool& pool = pools_[group];
  std::vector<BlockSnapshot> out(pool.refs.size());
  for (size_t b = 0; b < pool.refs.size(); ++b) {
    BlockSnapshot& s = out[b];
    s.refs = pool.refs[b];
    s.state = pool.refs[b] > 0 ? BlockSnapshot::State::kUsed
              : pool.in_lru[b] ? BlockSnapshot::State::kCached
                               : BlockSnapshot::State::kFree;
    if (pool.has_key[b]) {
      s.chain_index = pool.chain_index[b];
      s.hits = pool.hits_of[b];
    }
  }
  int32_t rank = 0;
  for (int32_t b : pool.lru) out[b].lru_rank = rank++;
  return out;
}

void BlockManager::Truncate(BlockTable& table, int n_tokens) {
  const size_t keep = static_cast<size_t>((std::max(n_tokens, 0) + block_size_ - 1) / block_size_);
  for (size_t g = 0; g < table.groups.size(); ++g) {
    std::vector<int32_t>& row = table.group(g);
    while (row.size() > keep) {
      if (row.back() != kNoBlock) Release(pools_[g], row.back());
      row.pop_back();
    }
  }
  if (table.keys.size() > keep) table.keys.resize(keep);
}

Status BlockManager::CheckInvariants() const {
  for (size_t g = 0; g < pools_.size(); ++g) {
    Status status = CheckPool(g);
    if (!status.ok()) {
      return pools_.size() == 1 ? status
                                : Status::FailedPrecondition("group " + std::to_string(g) + ": " +
                                                             status.message());
    }
  }
  return Status::Ok();
}

Status BlockManager::CheckPool(size_t group) const {
  const Pool& pool = pools_[group];
  const int n = static_cast<int>(pool.refs.size());
  std::vector<int> seen(n, 0);
  for (int32_t b : pool.free) {
    if (b < 0 || b >= n || seen[b]++)
      return Status::FailedPrecondition("free list corrupt at " + std::to_string(b));
    if (pool.refs[b] != 0 || pool.has_key[b])
      return Status::FailedPrecondition("free block " + std::to_string(b) +
                                        " is referenced or keyed");
  }
  for (int32_t b : pool.lru) {
    if (b < 0 || b >= n || seen[b]++)
      return Status::FailedPrecondition("LRU list corrupt at " + std::to_string(b));
    if (pool.refs[b] != 0 || !pool.has_key[b] || !pool.in_lru[b]) {
      return Status::FailedPrecondition("cached block " + std::to_string(b) +
                                        " is referenced or has no key");
    }
  }
  for (int b = 0; b < n; ++b) {
    if (pool.refs[b] < 0)
      return Status::FailedPrecondition("negative ref count on block " + std::to_string(b));
    if (!seen[b] && pool.refs[b] == 0) {
      return Status::FailedPrecondition("block " + std::to_string(b) +
                                        " is neither free, cached nor used");
    }
    if (seen[b] && pool.refs[b] > 0)
      return Status::FailedPrecondition("listed block " + std::to_string(b) + " is used");
    if (pool.in_lru[b] != (seen[b] && pool.has_key[b] && pool.refs[b] == 0)) {
      return Status::FailedPrecondition("LRU flag wrong on block " + std::to_string(b));
    }
  }
  size_t keyed = 0;
  for (int b = 0; b < n; ++b) keyed += pool.has_key[b];
  if (keyed != pool.cached.size())
    return Status::FailedPrecondition("key map size differs from keyed blocks");
  for (const auto& [key, block] : pool.cached) {
    if (!pool.has_key[block] || pool.key_of[block] != key) {
      return Status::FailedPrecondition("key map points to block " + std::to_string(block) +
                                        " with another key");
    }
  }
  const BlockManagerStats s = Stats(static_cast<int>(group));
  if (s.free + s.cached + s.used != s.total)
    return Status::FailedPrecondition("free + cached + used != total");
  return Status::Ok();
}

int BlockManager::AddEvictionHook(EvictionHook hook) {
  on_evict_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void BlockManager::RemoveEvictionHook(int id) {
  std::erase_if(on_evict_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace kvserve
