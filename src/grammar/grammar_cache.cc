#include "grammar/grammar_cache.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_grammar.h"

namespace kvserve {

Result<std::string> GrammarCache::ToGbnf(GrammarSource source, std::string_view text) const {
  switch (source) {
    case GrammarSource::kGbnf:
      return std::string(text);
    case GrammarSource::kJsonObject:
      return JsonObjectGbnf();
    case GrammarSource::kJsonSchema: {
      if (text.size() > limits_.max_source_bytes) {
        return Status::InvalidArgument("schema: larger than " +
                                       std::to_string(limits_.max_source_bytes) +
                                       " bytes (limit max_source_bytes)");
      }
      nlohmann::ordered_json schema =
          nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return Status::InvalidArgument("schema: not valid JSON");
      return JsonSchemaToGbnf(schema, limits_);
    }
  }
  return Status::Internal("unknown grammar source");
}

Result<std::shared_ptr<TokenMasker>> GrammarCache::Compile(GrammarSource source,
                                                           std::string_view text) const {
  const auto start = std::chrono::steady_clock::now();
  auto gbnf = ToGbnf(source, text);
  if (!gbnf.ok()) return gbnf.status();
  // A schema's grammar may be longer than the schema; its size is bounded by the rule and element
  // limits instead.
  GrammarLimits limits = limits_;
  if (source != GrammarSource::kGbnf) limits.max_source_bytes = 16 * limits_.max_source_bytes;
  auto grammar = ParseGbnf(*gbnf, limits);
  if (!grammar.ok()) return grammar.status();
  auto masker = std::make_shared<TokenMasker>(*grammar, vocab_);
  TokenMask first;
  masker->FillMask(GrammarMatcher(*grammar), first);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (ms > kMaxCompileMs) {
    return Status::InvalidArgument("grammar: compiling took " + std::to_string(int(ms)) +
                                   " ms, more than " + std::to_string(int(kMaxCompileMs)) +
                                   " (limit max_compile_ms)");
  }
  if (first.Empty()) return Status::InvalidArgument("grammar: no token of this model can start it");
  return masker;
}

Result<std::shared_ptr<TokenMasker>> GrammarCache::Get(GrammarSource source,
                                                       std::string_view text) {
  std::string key = std::to_string(static_cast<int>(source)) + ":" + std::string(text);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second.second);
      return it->second.first;
    }
  }
  auto masker = Compile(source, text);  // outside the lock: other requests go on meanwhile
  if (!masker.ok()) return masker.status();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second.first;  // compiled twice at once: keep the first
  recent_.push_front(key);
  entries_.emplace(std::move(key), std::make_pair(*masker, recent_.begin()));
  while (entries_.size() > kEntries) {
    entries_.erase(recent_.back());
    recent_.pop_back();
  }
  return *masker;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace kvserve
