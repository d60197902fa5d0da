// The regex split that byte-level BPE tokenizers apply before merging ("pre-tokenization"),
// chosen by tokenizer.ggml.pre. Patterns are compiled with PCRE2 (UTF, Unicode properties, JIT).
// Text that no alternative matches (only invalid UTF-8 with these patterns) is kept as its own
// piece, so the pieces always concatenate back to the input. Immutable after construction and
// safe to share between threads (each Split call allocates its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

class PreTokenizer {
 public:
  // `pre` is the value of tokenizer.ggml.pre: "gpt-2" and "default" (GPT-2's pattern),
  // "llama-bpe"/"llama3" (Llama 3), "qwen2". Others are an error naming the value.
  static Result<PreTokenizer> ForName(std::string_view pre);
  // Compiles an arbitrary pattern (tests, future vocabularies).
  static Result<PreTokenizer> FromPattern(std::string_view pattern);

  // Splits `text` into consecutive pieces (views into `text`), in order.
  std::vector<std::string_view> Split(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  PreTokenizer(std::string pattern, std::shared_ptr<const Code> code)
      : pattern_(std::move(pattern)), code_(std::move(code)) {}

  std::string pattern_;
  std::shared_ptr<const Code> code_;  // the compiled pcre2_code, freed with the last copy
};

}  // namespace kvserve
