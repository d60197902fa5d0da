#include "engine/proposer_history.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "engine/proposer_ngram.h"

namespace kvserve {

HistoryProposer::HistoryProposer(const HistoryProposerOptions& options) : options_(options) {
  options_.ngram = std::max(1, options_.ngram);
  options_.candidates = std::max(1, options_.candidates);
}

uint64_t HistoryProposer::Key(const std::string& tenant, std::span<const int32_t> ngram) const {
  uint64_t h = std::hash<std::string>()(tenant) ^ 0x9E3779B97F4A7C15ull;
  for (int32_t token : ngram) {
    h ^= static_cast<uint32_t>(token);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h;
}

size_t HistoryProposer::DigestHash::operator()(const BlockKey& key) const {
  size_t h = 0;
  std::memcpy(&h, key.data(), sizeof(h));  // a SHA-256 digest: any bytes are uniform
  return h;
}

const HistoryProposer::Entry* HistoryProposer::Find(uint64_t serial) const {
  if (entries_.empty() || serial < entries_.front().serial) return nullptr;
  const uint64_t i = serial - entries_.front().serial;
  return i < entries_.size() && !entries_[i].dropped ? &entries_[i] : nullptr;
}

HistoryProposer::Entry* HistoryProposer::Find(uint64_t serial) {
  return const_cast<Entry*>(std::as_const(*this).Find(serial));
}

size_t HistoryProposer::n_entries() const {
  return std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.dropped; });
}

void HistoryProposer::Add(const std::string& tenant, std::span<const int32_t> tokens,
                          int n_cached) {
  const size_t n = static_cast<size_t>(options_.ngram);
  if (options_.max_tokens == 0 || tokens.size() <= n) return;
  const size_t cached = n_cached < 0 ? tokens.size() : std::min<size_t>(n_cached, tokens.size());
  const std::span<const int32_t> all = tokens;
  if (tokens.size() > options_.max_tokens) tokens = tokens.last(options_.max_tokens);
  while (!entries_.empty() && n_tokens_ + tokens.size() > options_.max_tokens) EvictOldest();
  Entry& entry = entries_.emplace_back(
      Entry{.serial = next_serial_++, .tenant = tenant, .tokens = {tokens.begin(), tokens.end()}});
  n_tokens_ += tokens.size();
  // Every n-gram that has a token after it.
  for (size_t offset = 0; offset + n < entry.tokens.size(); ++offset) {
    const std::span<const int32_t> ngram(entry.tokens.data() + offset, n);
    index_[Key(tenant, ngram)].push_back(
        Position{.serial = entry.serial, .offset = static_cast<int32_t>(offset)});
  }
  TieToBlocks(entry, all.first(cached));
}

void HistoryProposer::TieToBlocks(Entry& entry, std::span<const int32_t> cached) {
  const size_t bs = static_cast<size_t>(options_.block_size);
  if (bs == 0) return;
  // The keys the prefix cache gave these blocks (BlockManager::Commit's chain over the salt).
  for (size_t start = 0; start + bs <= cached.size(); start += bs) {
    const BlockKey* parent = entry.blocks.empty() ? nullptr : &entry.blocks.back();
    entry.blocks.push_back(BlockManager::KeyOf(parent, entry.tenant, cached.subspan(start, bs)));
  }
  entry.live_blocks = static_cast<int>(entry.blocks.size());
  for (const BlockKey& key : entry.blocks) by_block_[key].push_back(entry.serial);
}

void HistoryProposer::BlockEvicted(const BlockKey& key) {
  auto it = by_block_.find(key);
  if (it == by_block_.end()) return;
  const std::deque<uint64_t> serials = std::move(it->second);
  by_block_.erase(it);
  for (uint64_t serial : serials) {
    Entry* entry = Find(serial);
    if (entry == nullptr || --entry->live_blocks > 0) continue;
    Unindex(*entry);
    entry->dropped = true;
  }
  while (!entries_.empty() && entries_.front().dropped) entries_.pop_front();
}

void HistoryProposer::Unindex(Entry& entry) {
  const size_t n = static_cast<size_t>(options_.ngram);
  for (size_t offset = 0; offset + n < entry.tokens.size(); ++offset) {
    const std::span<const int32_t> ngram(entry.tokens.data() + offset, n);
    auto it = index_.find(Key(entry.tenant, ngram));
    if (it == index_.end()) continue;
    // Lists grow in serial order, so the entry's positions are one run.
    std::vector<Position>& positions = it->second;
    const auto first =
        std::lower_bound(positions.begin(), positions.end(), entry.serial,
                         [](const Position& p, uint64_t serial) { return p.serial < serial; });
    const auto last = std::find_if(first, positions.end(),
                                   [&](const Position& p) { return p.serial != entry.serial; });
    positions.erase(first, last);
    if (positions.empty()) index_.erase(it);
  }
  for (const BlockKey& key : entry.blocks) {
    auto it = by_block_.find(key);
    if (it == by_block_.end()) continue;
    std::erase(it->second, entry.serial);
    if (it->second.empty()) by_block_.erase(it);
  }
  n_tokens_ -= entry.tokens.size();
  entry.tokens = {};
  entry.blocks = {};
}

void HistoryProposer::EvictOldest() {
  Unindex(entries_.front());
  entries_.pop_front();
  while (!entries_.empty() && entries_.front().dropped) entries_.pop_front();
}

std::vector<int32_t> HistoryProposer::Lookup(const std::string& tenant,
                                             std::span<const int32_t> tokens,
                                             int max_tokens) const {
  const size_t n = static_cast<size_t>(options_.ngram);
  if (tokens.size() < n || max_tokens <= 0) return {};
  const std::span<const int32_t> suffix = tokens.last(n);
  const auto it = index_.find(Key(tenant, suffix));
  if (it == index_.end()) return {};
  const std::vector<Position>& positions = it->second;
  int tried = 0;
  for (auto p = positions.rbegin(); p != positions.rend() && tried < options_.candidates; ++p) {
    ++tried;
    const Entry* entry = Find(p->serial);
    if (entry == nullptr || entry->tenant != tenant) continue;
    const auto start = entry->tokens.begin() + p->offset;
    if (!std::equal(suffix.begin(), suffix.end(), start)) continue;
    const auto from = start + static_cast<std::ptrdiff_t>(n);
    const auto count = std::min<std::ptrdiff_t>(max_tokens, entry->tokens.end() - from);
    return std::vector<int32_t>(from, from + count);
  }
  return {};
}

void HistoryProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& seq = *seqs[i];
    if (options_.prompt_lookup) {
      seq.draft = NgramProposer::Lookup(seq.tokens, options_.prompt_ngram_min,
                                        options_.prompt_ngram_max, max_tokens[i]);
      if (!seq.draft.empty()) continue;
    }
    seq.draft = Lookup(seq.request.cache_salt, seq.tokens, max_tokens[i]);
  }
}

void HistoryProposer::Forget(const Sequence& seq) {
  Add(seq.request.cache_salt, seq.tokens, seq.n_computed);
}

}  // namespace kvserve
