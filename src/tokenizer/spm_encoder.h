// SentencePiece-style BPE (Llama 1/2, TinyLlama, stories260K vocabularies): the text, already
// ▁-escaped, starts as one symbol per UTF-8 character; the adjacent pair whose concatenation is the
// highest-scoring vocabulary token is merged first (leftmost on ties) until no pair is a token.
// Symbols that are not tokens fall back to <0xNN> byte tokens (or <unk> if those are missing).
//
// Linked list plus binary heap: O(n log n) for n characters. Only normal, user-defined and
// undefined tokens take part in merges, so text never turns into control tokens such as <s>.
// Immutable after construction; Encode may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvserve {

class SpmEncoder {
 public:
  // `vocab` is borrowed and must outlive the encoder.
  explicit SpmEncoder(const Vocab& vocab);

  // Appends the ids of `text` to `out`. `text` must already have its spaces replaced by ▁
  // (EscapeWhitespace) and the prefix space added if wanted.
  void Encode(std::string_view text, std::vector<int32_t>& out) const;

  // " " -> "▁" (U+2581), as SentencePiece does before encoding.
  static std::string EscapeWhitespace(std::string_view text);
  // "▁" -> " ", the inverse used when decoding.
  static std::string UnescapeWhitespace(std::string_view text);
  // The byte of a "<0xNN>" token text, or -1 if `text` is not of that form.
  static int ParseByteToken(std::string_view text);

 private:
  // The id of `text` if it may be produced by merging, else kNoToken.
  int32_t FindMergeable(std::string_view text) const;
  void EmitSymbol(std::string_view text, std::vector<int32_t>& out) const;

  const Vocab* vocab_;                     // borrowed
  std::array<int32_t, 256> byte_token_{};  // <0xNN> ids, kNoToken where missing
};

}  // namespace kvserve
