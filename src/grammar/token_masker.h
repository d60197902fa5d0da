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

  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

  // The tokens that may follow the matcher's text (resets `mask` to the vocabulary).
  void FillMask(const GrammarMatcher& matcher, TokenMask& mask);
  // Whether one token may follow (the greedy fast path checks its choice first).
  bool Allows(const GrammarMatcher& matcher, int32_t id) const;

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const GrammarVocab& vocab() const { return *vocab_; }
  size_t cached_positions() const;

  // The slow reference the tests compare FillMask with: every token tried on its own.
  void FillMaskByEveryToken(const GrammarMatcher& matcher, TokenMask& mask) const;

 private:
  struct PositionMasks {
    TokenMask accepted;              // by the rule around the position alone
    std::vector<int32_t> uncertain;  // decided by the stacks below it
  };

  // Walks every token with text from `start`. isolated: `start` is one position's stack alone, and
  // a token that runs past its bottom goes to `uncertain` instead of being rejected.
  void Walk(const GrammarState& start, bool isolated, TokenMask& accepted,
            std::vector<int32_t>* uncertain) const;
  bool AcceptsBytes(const GrammarState& start, std::string_view bytes) const;
  // The cached masks of the top entries of `stack` (computed on first use); nullptr when the
  // cache is full.
  const PositionMasks* ForTop(const GrammarStack& stack);
  struct KeyHash {
    size_t operator()(const GrammarStack& key) const;
  };

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  mutable std::mutex mutex_;
  std::unordered_map<GrammarStack, std::unique_ptr<PositionMasks>, KeyHash> cache_;
  size_t cache_bytes_ = 0;
};

}  // namespace kvserve
