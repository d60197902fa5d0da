// SentencePiece unigram (UGM) tokenization, as llama.cpp does it for tokenizer.ggml.model "t5"
// (T5, Flan-T5, mT5, UMT5): normalize the text, then take the split into tokens whose scores add
// up to the most (Viterbi over a token trie), one fragment between special tokens at a time.
//
// Normalization reads the text left to right. A prefix that the trie of user-defined token texts
// can walk is kept as it is: all the bytes the walk covers, even when no token ends there and even
// part of a character (as llama.cpp's naive_trie::get_longest_prefix does; SentencePiece would
// normalize such text, see docs/tokenizers.md). Otherwise the charsmap's longest match is
// replaced (charsmap_normalizer.h), else one UTF-8 character is kept as it is, and a byte that
// starts no valid character becomes U+FFFD. Then every space becomes ▁ (U+2581); with
// tokenizer.ggml.remove_extra_whitespaces, spaces at the ends and repeated spaces are dropped and
// every run of other bytes gets one ▁ before it; with tokenizer.ggml.add_space_prefix, the first
// run gets one (after any spaces that precede it). llama.cpp never reads a whitespace-as-suffix
// flag from a GGUF, so neither does kvserve.
//
// The split: at each character boundary of the normalized text, every normal, user-defined and
// unused token that starts there is a candidate, scored with its tokenizer.ggml.scores value
// (user-defined tokens score 0); a character that no token covers whole is <unk> at the lowest
// normal score minus 10. Scores add up in double precision; a strictly higher sum replaces the
// best so far, so ties keep what was found first (earlier start, then shorter token). Adjacent
// <unk>s become one. Byte and control tokens never come out.
//
// Immutable after Create; Encode may be called from many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_reader.h"
#include "tokenizer/byte_trie.h"
#include "tokenizer/charsmap_normalizer.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace kvserve {

class UgmEncoder {
 public:
  // Reads tokenizer.ggml.precompiled_charsmap (optional; an array of uint8 or int8) from `file`.
  // `vocab` is borrowed and must outlive the encoder. Errors name the key and the bad value.
  static Result<UgmEncoder> Create(const GgufFile& file, const Vocab& vocab);

  // Appends the ids of `text`: raw text, one fragment between special tokens.
  void Encode(std::string_view text, std::vector<int32_t>& out) const;
  // The normalized text (▁ for spaces) that Encode splits.
  std::string Normalize(std::string_view text) const;

 private:
  UgmEncoder(const Vocab& vocab, CharsmapNormalizer charsmap);

  // The normalized form of the prefix of `text` at `offset` and how many bytes it consumes (>= 1).
  size_t NormalizePrefix(std::string_view text, size_t offset, std::string_view* piece) const;

  const Vocab* vocab_;  // borrowed
  CharsmapNormalizer charsmap_;
  ByteTrie tokens_;        // normal, user-defined and unused token texts -> ids
  ByteTrie user_defined_;  // user-defined token texts
  double unknown_score_;   // lowest normal score minus 10
};

}  // namespace kvserve
