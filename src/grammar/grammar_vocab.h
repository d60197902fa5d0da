// A vocabulary as the grammar engine reads it: every token's bytes (Tokenizer::TokenPiece), the
// tokens with text in byte order with the length each shares with the one before (so that a walk
// over them is a walk over their trie), and the end-of-generation tokens, which a grammar allows
// exactly when the text so far is a whole document. Control tokens other than those, and tokens
// with no bytes, are never allowed. Built once per model; immutable and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvserve {

class GrammarVocab {
 public:
  static std::shared_ptr<const GrammarVocab> FromTokenizer(const Tokenizer& tokenizer);
  // For tests: pieces by id, and which ids end generation.
  GrammarVocab(std::vector<std::string> pieces, std::vector<int32_t> end_tokens);

  int n_vocab() const { return static_cast<int>(pieces_.size()); }
  std::string_view piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  // Tokens with text, in byte order.
  const std::vector<int32_t>& order() const { return order_; }
  // Per position i of order(), its place in the trie: shared is the bytes order[i] shares with
  // order[i-1]; skip the first position k > i with shared[k] < shared[i] (order().size() when
  // none: every token between shares more than shared[i] bytes with order[i]), so a walk that
  // rejects a prefix jumps over the tokens under it instead of visiting each, reading one cache
  // line per step.
  struct TrieLink {
    uint32_t shared;
    uint32_t skip;
  };
  const std::vector<TrieLink>& links() const { return links_; }
  // The first position whose token begins with a byte greater than `byte` (order().size() when
  // none): a prefix rejected at its first byte is jumped over in one step.
  uint32_t after_first_byte(uint8_t byte) const { return after_first_byte_[byte]; }
  // The bytes of order()[i], from one buffer in that order (a walk reads it front to back).
  std::string_view sorted_piece(size_t i) const {
    return std::string_view(sorted_bytes_)
        .substr(sorted_offsets_[i], sorted_offsets_[i + 1] - sorted_offsets_[i]);
  }
  // The characters of order()[i]: its bytes that are not UTF-8 continuation bytes (a character
  // the token only begins counts as one).
  uint32_t sorted_chars(size_t i) const { return sorted_chars_[i]; }
  // The positions i in order() whose token has more than `n` characters, in increasing i.
  std::vector<uint32_t> LongerThan(uint32_t n) const;
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t id) const { return is_end_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> pieces_;  // [n_vocab]; empty for tokens a grammar never allows
  std::vector<int32_t> order_;
  std::vector<TrieLink> links_;
  std::vector<uint32_t> after_first_byte_;  // [256]
  std::string sorted_bytes_;                // the pieces of order_, concatenated
  std::vector<size_t> sorted_offsets_;      // [order_.size() + 1]
  std::vector<uint32_t> sorted_chars_;      // [order_.size()]
  std::vector<uint32_t> by_chars_;          // positions in order_, most characters first
  std::vector<int32_t> end_tokens_;
  std::vector<bool> is_end_;
};

}  // namespace kvserve
