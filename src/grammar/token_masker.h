// Which tokens a grammar allows next: the per-token mask that constrained decoding applies to the
// logits. A mask admits exactly the tokens whose bytes continue the text so far towards a valid
// document (and the end-of-generation tokens when the text is a whole document).
//
// The cost is kept low by caching per stack top (xgrammar's adaptive token mask): for the top
// kKeyDepth entries of a stack (the character set it expects and the rules around it), the
// vocabulary is walked once (as a trie, in byte order) from those entries alone. Tokens they
// accept or reject by themselves are decided for every stack with that top; only the few that run
// past the bottom of it ("uncertain": a quote and more after a string's characters) are checked
// against the whole stack at each step.
//
// A key's masks are derived from a cheaper key's wherever that is exact, walking only the tokens
// the cheaper key leaves open:
// - a key of d > kBaseDepth entries from its top d-1 entries (which many contexts share: the two
//   entries of a JSON string's character loop, whatever object the string is in): their accepted
//   and rejected tokens stand, their uncertain ones are walked again;
// - a key with an entry inside a bounded repetition's chain (more_k of x{m,n}, grammar.h) from the
//   same key with the chain's outermost rule instead (more_K): a token of at most k characters
//   cannot tell the two apart, so only its uncertain tokens and the accepted ones of more than k
//   characters are walked again (a rejection stands: more_k matches less than more_K). So the
//   positions inside a string with maxLength share one full walk.
// While a character is unfinished (a token ended inside it) the whole vocabulary is walked.
//
// One TokenMasker per (grammar, vocabulary), shared by the requests that use that grammar; its
// cache is guarded by a mutex, so masks may be filled from several threads.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"
#include "grammar/token_mask.h"

namespace kvserve {

class TokenMasker {
 public:
  // Cached masks stop growing past this many bytes; later positions are walked every time.
  static constexpr size_t kMaxCacheBytes = size_t{64} << 20;
  // Stack entries a cache key holds (fewer when the stack is shorter).
  static constexpr size_t kKeyDepth = 6;
  // Keys of at most this many entries walk the whole vocabulary; deeper ones derive from these.
  static constexpr size_t kBaseDepth = 2;

  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab);

  // The tokens that may follow the matcher's text (resets `mask` to the vocabulary).
  void FillMask(const GrammarMatcher& matcher, TokenMask& mask);
  // Whether one token may follow (the greedy fast path checks its choice first).
  bool Allows(const GrammarMatcher& matcher, int32_t id) const;

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const GrammarVocab& vocab() const { return *vocab_; }
  size_t cached_positions() const;
  // Tokens the cached walks have tried so far (a derived key tries only those left open).
  size_t walked_tokens() const;

  // The slow reference the tests compare FillMask with: every token tried on its own.
  void FillMaskByEveryToken(const GrammarMatcher& matcher, TokenMask& mask) const;

 private:
  struct PositionMasks {
    TokenMask accepted;               // by the entries of the key alone
    std::vector<uint32_t> uncertain;  // positions in vocab order(): decided by the stack below
  };
  // The alternative of a chain rule more_k (k >= 2) and where the same entries lie in more_K.
  struct ChainAlternative {
    const GrammarElement* begin;
    const GrammarElement* end;
    const GrammarElement* top_begin;
    uint32_t count;  // k
  };

  // Walks the tokens at positions `subset` of vocab order() (every token when null), in
  // increasing order, with text from `start`. isolated: `start` is a key's entries alone, and a
  // token that runs past their bottom goes to `uncertain` instead of being rejected.
  void Walk(const GrammarState& start, bool isolated, const std::vector<uint32_t>* subset,
            TokenMask& accepted, std::vector<uint32_t>* uncertain) const;
  bool AcceptsBytes(const GrammarState& start, std::string_view bytes) const;
  // The cached masks of the top entries of `stack` (computed on first use); nullptr when the
  // cache is full.
  const PositionMasks* ForTop(const GrammarStack& stack);
  // The masks of `key` (a null first entry: the key is a whole stack), derived as the header
  // says; the mutex is held.
  const PositionMasks* ForKey(const GrammarStack& key);
  const ChainAlternative* FindChain(const GrammarElement* entry) const;
  struct KeyHash {
    size_t operator()(const GrammarStack& key) const;
  };

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::vector<ChainAlternative> chains_;  // sorted by begin
  mutable std::mutex mutex_;
  std::unordered_map<GrammarStack, std::unique_ptr<PositionMasks>, KeyHash> cache_;
  size_t cache_bytes_ = 0;
  size_t walked_tokens_ = 0;
};

}  // namespace kvserve
