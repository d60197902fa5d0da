// Compiles what a request asks its output to be (GBNF text, a JSON Schema, or any JSON object)
// into a TokenMasker for one vocabulary, and keeps the most recent ones: agents send the same tool
// and response schemas again and again, and a kept masker keeps its per-position masks warm.
//
// Compiling checks every GrammarLimits limit, then fills the first mask; if all of it takes longer
// than max_compile_ms the grammar is refused (a grammar whose masks are that slow to fill would
// slow every decode step of the server). Thread-safe; one per served model.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grammar/grammar.h"
#include "grammar/grammar_vocab.h"
#include "grammar/token_masker.h"
#include "util/status.h"

namespace kvserve {

enum class GrammarSource : uint8_t {
  kGbnf,        // llama.cpp's GBNF text
  kJsonSchema,  // a JSON Schema, as JSON text (grammar/json_schema_grammar.h)
  kJsonObject,  // any JSON object (the text is ignored)
};

class GrammarCache {
 public:
  static constexpr size_t kEntries = 64;
  static constexpr double kMaxCompileMs = 2000;

  explicit GrammarCache(std::shared_ptr<const GrammarVocab> vocab, GrammarLimits limits = {})
      : vocab_(std::move(vocab)), limits_(limits) {}

  // The masker for `text`, compiled now or found; errors name the problem and the limit.
  Result<std::shared_ptr<TokenMasker>> Get(GrammarSource source, std::string_view text);
  // The GBNF text `source` and `text` compile to (for the grammar's own errors and for users
  // asking what their schema became).
  Result<std::string> ToGbnf(GrammarSource source, std::string_view text) const;

  const GrammarVocab& vocab() const { return *vocab_; }
  size_t size() const;

 private:
  Result<std::shared_ptr<TokenMasker>> Compile(GrammarSource source, std::string_view text) const;

  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarLimits limits_;
  mutable std::mutex mutex_;
  std::list<std::string> recent_;  // keys, most recent first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<TokenMasker>, std::list<std::string>::iterator>>
      entries_;
};

}  // namespace kvserve
