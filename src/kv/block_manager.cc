#include "kv/block_manager.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace kvserve {

size_t BlockManager::KeyHash::operator()(const BlockKey& key) const {
  size_t h;
  std::memcpy(&h, key.data(), sizeof(h));
  return h;
}

BlockManager::BlockManager(int n_blocks, int block_size, bool prefix_caching)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      refs_(n_blocks, 0),
      has_key_(n_blocks, false),
      key_of_(n_blocks),
      lru_pos_(n_blocks),
      in_lru_(n_blocks, false),
      chain_index_(n_blocks, -1),
      hits_of_(n_blocks, 0) {
  free_.reserve(n_blocks);
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out 0, 1, 2, ... first
}

BlockManagerStats BlockManager::Stats() const {
  BlockManagerStats s;
  s.total = n_blocks();
  s.free = static_cast<int>(free_.size());
  s.cached = static_cast<int>(lru_.size());
  s.used = s.total - s.free - s.cached;
  s.prefix_queries_tokens = queries_;
  s.prefix_hits_tokens = hits_;
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

int BlockManager::CachedPrefixTokens(std::span<const int32_t> tokens,
                                     const std::string& salt) const {
  if (!prefix_caching_ || tokens.empty()) return 0;
  const size_t max_blocks = (tokens.size() - 1) / block_size_;
  BlockKey key{};
  for (size_t b = 0; b < max_blocks; ++b) {
    key = KeyOf(b ? &key : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    if (!cached_.count(key)) return static_cast<int>(b * block_size_);
  }
  return static_cast<int>(max_blocks * block_size_);
}

void BlockManager::Reference(int32_t block) {
  if (in_lru_[block]) {
    lru_.erase(lru_pos_[block]);
    in_lru_[block] = false;
  }
  ++refs_[block];
}

int BlockManager::AllocatePrefix(BlockTable& table, std::span<const int32_t> tokens,
                                 const std::string& salt) {
  assert(table.empty());
  if (!prefix_caching_ || tokens.empty()) return 0;
  const size_t max_blocks = (tokens.size() - 1) / block_size_;
  for (size_t b = 0; b < max_blocks; ++b) {
    const BlockKey key =
        KeyOf(b ? &table.keys.back() : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    auto it = cached_.find(key);
    if (it == cached_.end()) break;
    Reference(it->second);
    ++hits_of_[it->second];
    table.blocks.push_back(it->second);
    table.keys.push_back(key);
  }
  return static_cast<int>(table.blocks.size()) * block_size_;
}

int BlockManager::ExtendPrefix(BlockTable& table, std::span<const int32_t> tokens,
                               const std::string& salt) {
  const size_t held = table.blocks.size();
  if (!prefix_caching_ || tokens.empty() || table.keys.size() != held) {
    return static_cast<int>(held) * block_size_;
  }
  const size_t max_blocks = (tokens.size() - 1) / block_size_;
  for (size_t b = held; b < max_blocks; ++b) {
    const BlockKey key =
        KeyOf(b ? &table.keys.back() : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    auto it = cached_.find(key);
    if (it == cached_.end()) break;
    Reference(it->second);
    ++hits_of_[it->second];
    table.blocks.push_back(it->second);
    table.keys.push_back(key);
  }
  return static_cast<int>(table.blocks.size()) * block_size_;
}

int BlockManager::BlocksToHold(const BlockTable& table, int n_tokens) const {
  const int needed = (n_tokens + block_size_ - 1) / block_size_;
  return std::max(0, needed - static_cast<int>(table.blocks.size()));
}

int32_t BlockManager::TakeFreshBlock() {
  int32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    assert(!lru_.empty());
    block = lru_.front();
    if (on_evict_) on_evict_(block, key_of_[block]);
    lru_.pop_front();
    in_lru_[block] = false;
    cached_.erase(key_of_[block]);
    has_key_[block] = false;
  }
  refs_[block] = 1;
  return block;
}

bool BlockManager::AdoptCached(const BlockKey& key,
                               const std::function<bool(int32_t block)>& fill) {
  if (!prefix_caching_ || available() == 0 || HasKey(key)) return false;
  const int32_t block = TakeFreshBlock();
  refs_[block] = 0;
  if (!fill(block)) {
    free_.push_back(block);
    return false;
  }
  has_key_[block] = true;
  key_of_[block] = key;
  cached_[key] = block;
  lru_.push_back(block);
  lru_pos_[block] = std::prev(lru_.end());
  in_lru_[block] = true;
  return true;
}

bool BlockManager::Grow(BlockTable& table, int n_tokens, bool evict) {
  const int needed = BlocksToHold(table, n_tokens);
  if (needed > (evict ? available() : static_cast<int>(free_.size()))) return false;
  for (int i = 0; i < needed; ++i) table.blocks.push_back(TakeFreshBlock());
  return true;
}

void BlockManager::Commit(BlockTable& table, std::span<const int32_t> tokens, int n_computed,
                          const std::string& salt) {
  if (!prefix_caching_) return;
  const size_t full = std::min<size_t>(n_computed / block_size_, table.blocks.size());
  for (size_t b = table.keys.size(); b < full; ++b) {
    const BlockKey key =
        KeyOf(b ? &table.keys.back() : nullptr, salt, tokens.subspan(b * block_size_, block_size_));
    table.keys.push_back(key);
    const int32_t block = table.blocks[b];
    if (has_key_[block]) continue;  // (only blocks taken from the cache have keys already)
    // Another sequence may have registered the same content first; keep that one in the map.
    if (cached_.emplace(key, block).second) {
      has_key_[block] = true;
      key_of_[block] = key;
      chain_index_[block] = static_cast<int32_t>(b);
      hits_of_[block] = 0;
    }
  }
}

BlockTable BlockManager::Share(const BlockTable& table, int n_blocks) {
  BlockTable shared;
  n_blocks = std::min<int>(n_blocks, static_cast<int>(table.blocks.size()));
  for (int b = 0; b < n_blocks; ++b) {
    Reference(table.blocks[b]);
    shared.blocks.push_back(table.blocks[b]);
    if (b < static_cast<int>(table.keys.size())) shared.keys.push_back(table.keys[b]);
  }
  return shared;
}

void BlockManager::Release(int32_t block) {
  assert(refs_[block] > 0);
  if (--refs_[block] > 0) return;
  if (has_key_[block]) {
    lru_.push_back(block);
    lru_pos_[block] = std::prev(lru_.end());
    in_lru_[block] = true;
  } else {
    free_.push_back(block);
  }
}

void BlockManager::Free(BlockTable& table) {
  // Release the tail first so that, under LRU eviction, a sequence's early (most shareable)
  // blocks are evicted last.
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) Release(*it);
  table.blocks.clear();
  table.keys.clear();
}

std::vector<std::pair<int32_t, BlockKey>> BlockManager::KeyedBlocks() const {
  std::vector<std::pair<int32_t, BlockKey>> out;
  for (size_t b = 0; b < refs_.size(); ++b) {
    if (has_key_[b]) out.emplace_back(static_cast<int32_t>(b), key_of_[b]);
  }
  return out;
}

std::vector<BlockSnapshot> BlockManager::Snapshot() const {
  std::vector<BlockSnapshot> out(refs_.size());
  for (size_t b = 0; b < refs_.size(); ++b) {
    BlockSnapshot& s = out[b];
    s.refs = refs_[b];
    s.state = refs_[b] > 0 ? BlockSnapshot::State::kUsed
              : in_lru_[b] ? BlockSnapshot::State::kCached
                           : BlockSnapshot::State::kFree;
    if (has_key_[b]) {
      s.chain_index = chain_index_[b];
      s.hits = hits_of_[b];
    }
  }
  int32_t rank = 0;
  for (int32_t b : lru_) out[b].lru_rank = rank++;
  return out;
}

void BlockManager::Truncate(BlockTable& table, int n_tokens) {
  const size_t keep = static_cast<size_t>((std::max(n_tokens, 0) + block_size_ - 1) / block_size_);
  while (table.blocks.size() > keep) {
    Release(table.blocks.back());
    table.blocks.pop_back();
  }
  if (table.keys.size() > keep) table.keys.resize(keep);
}

Status BlockManager::CheckInvariants() const {
  const int n = n_blocks();
  std::vector<int> seen(n, 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= n || seen[b]++)
      return Status::FailedPrecondition("free list corrupt at " + std::to_string(b));
    if (refs_[b] != 0 || has_key_[b])
      return Status::FailedPrecondition("free block " + std::to_string(b) +
                                        " is referenced or keyed");
  }
  for (int32_t b : lru_) {
    if (b < 0 || b >= n || seen[b]++)
      return Status::FailedPrecondition("LRU list corrupt at " + std::to_string(b));
    if (refs_[b] != 0 || !has_key_[b] || !in_lru_[b]) {
      return Status::FailedPrecondition("cached block " + std::to_string(b) +
                                        " is referenced or has no key");
    }
  }
  for (int b = 0; b < n; ++b) {
    if (refs_[b] < 0)
      return Status::FailedPrecondition("negative ref count on block " + std::to_string(b));
    if (!seen[b] && refs_[b] == 0) {
      return Status::FailedPrecondition("block " + std::to_string(b) +
                                        " is neither free, cached nor used");
    }
    if (seen[b] && refs_[b] > 0)
      return Status::FailedPrecondition("listed block " + std::to_string(b) + " is used");
    if (in_lru_[b] != (seen[b] && has_key_[b] && refs_[b] == 0)) {
      return Status::FailedPrecondition("LRU flag wrong on block " + std::to_string(b));
    }
  }
  size_t keyed = 0;
  for (int b = 0; b < n; ++b) keyed += has_key_[b];
  if (keyed != cached_.size())
    return Status::FailedPrecondition("key map size differs from keyed blocks");
  for (const auto& [key, block] : cached_) {
    if (!has_key_[block] || key_of_[block] != key) {
      return Status::FailedPrecondition("key map points to block " + std::to_string(block) +
                                        " with another key");
    }
  }
  const BlockManagerStats s = Stats();
  if (s.free + s.cached + s.used != s.total)
    return Status::FailedPrecondition("free + cached + used != total");
  return Status::Ok();
}

}  // namespace kvserve
