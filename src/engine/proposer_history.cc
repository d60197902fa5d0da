#include "engine/proposer_history.h"

#include <algorithm>
#include <functional>

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

const HistoryProposer::Entry* HistoryProposer::Find(uint64_t serial) const {
  if (entries_.empty() || serial < entries_.front().serial) return nullptr;
  const uint64_t i = serial - entries_.front().serial;
  return i < entries_.size() ? &entries_[i] : nullptr;
}

void HistoryProposer::Add(const std::string& tenant, std::span<const int32_t> tokens) {
  const size_t n = static_cast<size_t>(options_.ngram);
  if (options_.max_tokens == 0 || tokens.size() <= n) return;
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
}

void HistoryProposer::EvictOldest() {
  const Entry& oldest = entries_.front();
  const size_t n = static_cast<size_t>(options_.ngram);
  // Its positions are at the front of each list (lists grow in serial order).
  for (size_t offset = 0; offset + n < oldest.tokens.size(); ++offset) {
    const std::span<const int32_t> ngram(oldest.tokens.data() + offset, n);
    auto it = index_.find(Key(oldest.tenant, ngram));
    if (it == index_.end()) continue;
    std::vector<Position>& positions = it->second;
    const auto first_kept =
        std::find_if(positions.begin(), positions.end(),
                     [&](const Position& p) { return p.serial != oldest.serial; });
    positions.erase(positions.begin(), first_kept);
    if (positions.empty()) index_.erase(it);
  }
  n_tokens_ -= oldest.tokens.size();
  entries_.pop_front();
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

void HistoryProposer::Forget(const Sequence& seq) { Add(seq.request.cache_salt, seq.tokens); }

}  // namespace kvserve
