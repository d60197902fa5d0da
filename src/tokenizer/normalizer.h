// A Hugging Face tokenizer's normalizer: the text rewrites tokenizer.json applies to every plain
// text fragment (between special tokens) before pre-tokenization. llama.cpp's GGUF files carry
// none (llama.cpp ignores normalizers); a folder read by io/hf_tokenizer stores its normalizer as
// tokenizer.kvserve.normalizer, an array of (stage, a, b) string triples in order:
//
//   nfc, nfd, nfkc, nfkd     Unicode normalization forms (ICU)          a, b unused ("")
//   lowercase                full Unicode lowercase, as Rust's str::to_lowercase (ICU root)
//   strip_accents            drops non-spacing marks (general category Mn)
//   strip                    White_Space trimmed: a == "1" on the left, b == "1" on the right
//   replace                  every occurrence of the string a by b
//   replace_regex            every match of the PCRE2 (UTF) pattern a by the literal b
//   prepend                  a in front of non-empty text
//
// Invalid UTF-8 is never rewritten: each stage rewrites the valid runs between invalid bytes and
// passes those bytes through, so byte-level vocabularies still see every input byte. Normalized
// text is what the model sees: Decode gives it back, not the original (as with Hugging Face).
// Immutable after FromStages; Apply is const and thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

class Normalizer {
 public:
  struct Stage {
    std::string name;  // one of the names above
    std::string a;
    std::string b;
  };

  Normalizer();
  ~Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;

  // `triples` as stored in tokenizer.kvserve.normalizer; an unknown stage name or a pattern that
  // does not compile is an error naming the stage's index and value.
  static Result<Normalizer> FromTriples(std::span<const std::string> triples);

  bool empty() const { return stages_.empty(); }
  std::string Apply(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<Stage> stages_;
  std::vector<std::unique_ptr<Compiled>> compiled_;  // per stage; the regex of replace_regex
};

}  // namespace kvserve
