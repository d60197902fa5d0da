// Turns generated tokens into text as they arrive. A token may end in the middle of a UTF-8
// character (byte-fallback and byte-level tokens split characters), so Push() returns only the
// text that is complete and holds back the bytes of an unfinished character; Flush() ends the
// stream. Invalid bytes become U+FFFD. For any split of a token sequence,
//   Push(t0) + Push(t1) + ... + Flush() == SanitizeUtf8(tokenizer.Decode(all tokens)),
// including the SentencePiece prefix-space rule of Tokenizer::Decode when the tokens start the
// text (Options::at_text_start).
//
// One decoder per stream; not thread-safe. The tokenizer is borrowed and must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace kvserve {

class StreamingDecoder {
 public:
  struct Options {
    bool render_special = false;  // as in Tokenizer::TokenPiece
    // The first token starts the text, so the prefix space Encode added is stripped (as Decode
    // does). Set false when continuing after a prompt, where a leading space is real.
    bool at_text_start = true;
  };

  explicit StreamingDecoder(const Tokenizer& tokenizer) : StreamingDecoder(tokenizer, Options{}) {}
  StreamingDecoder(const Tokenizer& tokenizer, Options options);

  // The text completed by `token` (may be empty while a character is unfinished).
  std::string Push(int32_t token);
  // The held-back rest (an unfinished character becomes U+FFFD). The decoder then starts a new
  // stream with the same options.
  std::string Flush();

  // Bytes currently held back (0..3).
  int pending_bytes() const { return sanitizer_.pending_bytes(); }

 private:
  const Tokenizer* tokenizer_;  // borrowed
  Options options_;
  bool strip_space_;  // the next non-empty piece loses one leading space
  Utf8Sanitizer sanitizer_;
};

}  // namespace kvserve
