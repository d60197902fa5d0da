// History drafting: the tokens that earlier requests of the same tenant read or produced (their
// prompts and outputs, added when they leave the engine) are indexed by their n-grams; a decoding
// sequence whose last `ngram` tokens occur there gets the tokens that followed the most recent
// occurrence as its draft. Agents replaying a tool's output, a document quoted again, an answer
// asked for twice: what one request produced, the next one's drafts already hold. Optionally the
// sequence's own tokens are looked up first (prompt lookup, NgramProposer::Lookup).
//
// Tenants are Request::cache_salt (the server folds the API key into it): a sequence only ever
// drafts from its own tenant's history, as the prefix cache only ever shares its own tenant's
// blocks. Memory is bounded: past max_tokens the oldest requests' tokens leave the history. And
// an entry lives no longer than its request's blocks: with block_size set (the prefix cache on),
// each entry counts the prefix-cache blocks that hold its tokens (their keys as
// BlockManager::KeyOf makes them, over its tenant's salt) and leaves the history when the last of
// them is evicted from memory (BlockEvicted): what the cache has let go of, no request drafts
// from. Entries shorter than a block are bounded by max_tokens alone. Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/proposer.h"

namespace kvserve {

struct HistoryProposerOptions {
  int ngram = 3;                // tokens of a sequence's end looked up in the history
  size_t max_tokens = 1 << 20;  // history kept over all tenants, in tokens (0: none)
  bool prompt_lookup = false;   // look in the sequence's own tokens first
  int prompt_ngram_min = 1;     // prompt lookup's suffix lengths (NgramProposer)
  int prompt_ngram_max = 3;
  int candidates = 8;  // most recent occurrences of an n-gram tried, newest first
  int block_size = 0;  // the prefix cache's block size (0: entries not tied to blocks)
};

class HistoryProposer final : public Proposer {
 public:
  explicit HistoryProposer(const HistoryProposerOptions& options);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;
  // Adds the leaving sequence's tokens (prompt and output) to its tenant's history, tied to the
  // blocks of its first n_computed tokens.
  void Forget(const Sequence& seq) override;
  // The entries held by the block of `key` lose it; those left with none leave the history.
  void BlockEvicted(const BlockKey& key) override;

  // Adds `tokens` read or produced by `tenant` (what Forget does with a sequence), tied to the
  // prefix-cache blocks of tokens[0, n_cached) (-1: of all of them).
  void Add(const std::string& tenant, std::span<const int32_t> tokens, int n_cached = -1);
  // The draft for a sequence of `tenant` ending in `tokens` (at most max_tokens; empty: none).
  std::vector<int32_t> Lookup(const std::string& tenant, std::span<const int32_t> tokens,
                              int max_tokens) const;
  // Tokens held, over all tenants; requests held.
  size_t n_tokens() const { return n_tokens_; }
  size_t n_entries() const;

 private:
  struct Entry {
    uint64_t serial;  // increasing; positions name it
    std::string tenant;
    std::vector<int32_t> tokens;   // empty once dropped
    std::vector<BlockKey> blocks;  // the prefix-cache blocks that hold its tokens
    int live_blocks = 0;           // of those, still in memory
    bool dropped = false;          // its blocks are gone; waits to reach the front of entries_
  };
  struct DigestHash {
    size_t operator()(const BlockKey& key) const;
  };
  struct Position {
    uint64_t serial;
    int32_t offset;  // where the n-gram starts in the entry's tokens
  };
  uint64_t Key(const std::string& tenant, std::span<const int32_t> ngram) const;
  const Entry* Find(uint64_t serial) const;
  Entry* Find(uint64_t serial);
  // Ties the entry to the prefix-cache blocks of `cached` (its request's computed tokens).
  void TieToBlocks(Entry& entry, std::span<const int32_t> cached);
  // Removes the entry's n-gram positions and block ties and frees its tokens.
  void Unindex(Entry& entry);
  void EvictOldest();

  HistoryProposerOptions options_;
  std::deque<Entry> entries_;  // oldest first; serials ascending
  uint64_t next_serial_ = 0;
  size_t n_tokens_ = 0;
  // (tenant, n-gram) hash -> its positions, oldest first. Hash collisions are harmless: every
  // candidate's tenant and tokens are compared before it drafts.
  std::unordered_map<uint64_t, std::vector<Position>> index_;
  // Block key -> the serials of the entries it holds, oldest first.
  std::unordered_map<BlockKey, std::deque<uint64_t>, DigestHash> by_block_;
};

}  // namespace kvserve
