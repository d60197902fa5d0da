#include "cli/grammar_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grammar/grammar_cache.h"
#include "tokenizer/chat_template.h"

namespace kvserve {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The arguments of a typical tool call (a weather lookup, as in OpenAI's function-calling guide).
constexpr const char* kToolSchema = R"({"type": "object", "properties": {
  "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "include_hourly": {"type": "boolean"}},
  "required": ["location", "unit", "days"], "additionalProperties": false})";

constexpr const char* kPersonSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 40},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
  "address": {"type": "object", "properties": {"street": {"type": "string"},
    "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
    "required": ["street", "city", "zip"]},
  "pets": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "kind": {"enum": ["cat", "dog", "fish", "bird"]}},
    "required": ["name", "kind"]}}},
  "required": ["name", "age", "email", "address", "pets"]})";

Result<std::pair<std::string, std::string>> SchemaText(const std::string& name) {
  if (name == "tool") {
    return std::make_pair(
        std::string(kToolSchema),
        std::string("What is the weather going to be in Lyon over the next "
                    "five days? Give the arguments of a weather lookup as JSON."));
  }
  if (name == "person") {
    return std::make_pair(std::string(kPersonSchema),
                          std::string("Invent a person with an address and two pets, as JSON."));
  }
  std::ifstream in(name);
  if (!in) return Status::NotFound("flag --structured: cannot read '" + name + "'");
  std::stringstream text;
  text << in.rdbuf();
  return std::make_pair(text.str(), std::string("Answer with a JSON document."));
}

struct Timing {
  double tokens_per_s = 0;  // after the first token
  double mask_ms_per_token = 0;
  int tokens = 0;
};

Result<Timing> Decode(Engine& engine, Request request) {
  const EngineStats before = engine.Stats();
  auto stream = engine.Submit(std::move(request));
  if (!stream.ok()) return stream.status();
  int tokens = 0;
  Clock::time_point first, last;
  for (;;) {
    const std::optional<RequestEvent> event = (*stream)->Next(std::chrono::milliseconds(1000));
    if (!event) continue;
    if (event->kind == RequestEvent::Kind::kFinish) break;
    if (tokens++ == 0) first = Clock::now();
    last = Clock::now();
  }
  const EngineStats after = engine.Stats();
  Timing t{.tokens = tokens};
  const double seconds = std::chrono::duration<double>(last - first).count();
  if (tokens > 1 && seconds > 0) t.tokens_per_s = (tokens - 1) / seconds;
  const uint64_t sampled = (after.grammar_masked + after.grammar_checked) -
                           (before.grammar_masked + before.grammar_checked);
  if (sampled > 0) t.mask_ms_per_token = (after.grammar_mask_ms - before.grammar_mask_ms) / sampled;
  return t;
}

}  // namespace

Result<std::vector<GrammarBenchRow>> RunGrammarBench(const Model& model, const Tokenizer& tokenizer,
                                                     const GrammarBenchOptions& options) {
  auto schema = SchemaText(options.schema);
  if (!schema.ok()) return schema.status();
  auto chat = ChatTemplate::ForModel(model.file(), tokenizer, "");
  if (!chat.ok()) return chat.status();
  const std::vector<ChatMessage> messages = {{"user", schema->second}};
  const std::vector<int32_t> prompt = chat->EncodeConversation(tokenizer, messages, true);
  Clock::time_point start = Clock::now();
  const auto vocab = GrammarVocab::FromTokenizer(tokenizer);
  const double vocab_ms = MsSince(start);
  EngineOptions engine_options = options.engine;
  engine_options.n_ctx = static_cast<int>(prompt.size()) + options.n_gen + 8;
  auto engine = Engine::Create(model, tokenizer, engine_options);
  if (!engine.ok()) return engine.status();
  std::vector<GrammarBenchRow> rows;
  for (const std::string& sampling : options.samplings) {
    GrammarBenchRow row{.schema = options.schema, .sampling = sampling, .vocab_ms = vocab_ms};
    std::vector<double> compile_ms;
    for (int round = 0; round < options.repeats; ++round) {
      Request request{.prompt = prompt, .max_tokens = options.n_gen};
      request.sampling.temperature = sampling == "seeded" ? 0.8f : 0.0f;
      request.sampling.top_p = sampling == "seeded" ? 0.95f : 1.0f;
      request.sampling.seed = 1000 + round;
      request.speculative = false;
      Request plain = request;
      plain.ignore_eos = true;
      auto p = Decode(**engine, plain);
      if (!p.ok()) return p.status();
      GrammarCache cache(vocab);  // fresh: the first request pays the cold masks
      start = Clock::now();
      auto masker = cache.Get(GrammarSource::kJsonSchema, schema->first);
      if (!masker.ok()) return masker.status();
      compile_ms.push_back(MsSince(start));
      request.grammar = *masker;
      auto cold = Decode(**engine, request);
      if (!cold.ok()) return cold.status();
      auto warm = Decode(**engine, request);
      if (!warm.ok()) return warm.status();
      row.plain_tokens_per_s = std::max(row.plain_tokens_per_s, p->tokens_per_s);
      row.cold_tokens_per_s = std::max(row.cold_tokens_per_s, cold->tokens_per_s);
      row.warm_tokens_per_s = std::max(row.warm_tokens_per_s, warm->tokens_per_s);
      row.cold_mask_ms = round == 0 ? cold->mask_ms_per_token
                                    : std::min(row.cold_mask_ms, cold->mask_ms_per_token);
      row.warm_mask_ms = round == 0 ? warm->mask_ms_per_token
                                    : std::min(row.warm_mask_ms, warm->mask_ms_per_token);
      row.constrained_tokens = warm->tokens;
    }
    std::sort(compile_ms.begin(), compile_ms.end());
    row.compile_ms = compile_ms[compile_ms.size() / 2];
    rows.push_back(row);
  }
  return rows;
}

std::string FormatGrammarBench(const std::vector<GrammarBenchRow>& rows,
                               const std::string& format) {
  if (format == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const GrammarBenchRow& r : rows) {
      out.push_back({{"schema", r.schema},
                     {"sampling", r.sampling},
                     {"vocab_ms", r.vocab_ms},
                     {"compile_ms", r.compile_ms},
                     {"plain_tokens_per_s", r.plain_tokens_per_s},
                     {"cold_tokens_per_s", r.cold_tokens_per_s},
                     {"warm_tokens_per_s", r.warm_tokens_per_s},
                     {"cold_mask_ms_per_token", r.cold_mask_ms},
                     {"warm_mask_ms_per_token", r.warm_mask_ms},
                     {"warm_mask_fraction_of_step", r.warm_fraction()},
                     {"constrained_tokens", r.constrained_tokens}});
    }
    return out.dump(2) + "\n";
  }
  std::string out =
      "| schema | sampling | compile ms | plain t/s | constrained t/s cold / warm | mask ms/token "
      "cold / warm | warm mask / plain step | tokens |\n|---|---|---|---|---|---|---|---|\n";
  char line[512];
  for (const GrammarBenchRow& r : rows) {
    std::snprintf(line, sizeof(line),
                  "| %s | %s | %.2f | %.1f | %.1f / %.1f | %.3f / %.4f | %.2f%% | %d |\n",
                  r.schema.c_str(), r.sampling.c_str(), r.compile_ms, r.plain_tokens_per_s,
                  r.cold_tokens_per_s, r.warm_tokens_per_s, r.cold_mask_ms, r.warm_mask_ms,
                  100.0 * r.warm_fraction(), r.constrained_tokens);
    out += line;
  }
  if (!rows.empty()) {
    std::snprintf(line, sizeof(line), "(grammar vocabulary built in %.1f ms, once per model)\n",
                  rows[0].vocab_ms);
    out += line;
  }
  return out;
}

}  // namespace kvserve
