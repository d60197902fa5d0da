// The regex split that byte-level BPE tokenizers apply before merging ("pre-tokenization"),
// chosen by tokenizer.ggml.pre. Patterns are compiled with PCRE2 (UTF, Unicode properties, JIT).
// Text that no alternative matches (only invalid UTF-8 with these patterns) is kept as its own
// piece, so the pieces always concatenate back to the input. Immutable after construction and
// safe to share between threads (each Split call allocates its own match data).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

class PreTokenizer {
 public:
  // `pre` is the value of tokenizer.ggml.pre: "gpt-2", "mpt", "gpt-neox" (GPT-2's pattern;
  // "gpt-neox" is kvserve's name for Hugging Face's GPT-NeoX split, unknown to llama.cpp),
  // "llama-bpe"/"llama3" (Llama 3), "qwen2", and the staged splits "default" (also "", a file
  // without the key, as llama.cpp does), "deepseek-llm", "deepseek-coder", "falcon",
  // "starcoder"/"refact"/"smollm"/"command-r". Others are an error naming the value.
  static Result<PreTokenizer> ForName(std::string_view pre);
  // Compiles an arbitrary pattern (tests, future vocabularies).
  static Result<PreTokenizer> FromPattern(std::string_view pattern);
  // Stages applied in turn: each splits every piece of the previous stage (matches and the text
  // between them both become pieces), as a Hugging Face Sequence of Split pre-tokenizers.
  static Result<PreTokenizer> FromStages(std::span<const std::string_view> stages);

  // Splits `text` into consecutive pieces (views into `text`), in order.
  std::vector<std::string_view> Split(std::string_view text) const;

  const std::vector<std::string>& patterns() const { return patterns_; }  // one per stage

 private:
  struct Code;
  PreTokenizer(std::vector<std::string> patterns, std::shared_ptr<const Code> code)
      : patterns_(std::move(patterns)), code_(std::move(code)) {}

  std::vector<std::string> patterns_;
  std::shared_ptr<const Code> code_;  // the compiled pcre2_code per stage, freed with the last copy
};

}  // namespace kvserve
