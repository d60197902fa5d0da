// Constrained decoding inside the engine, on SmolLM2-135M-Instruct: every constrained output is a
// document of its grammar, and a request gets the same tokens alone, batched with unconstrained
// and other constrained requests, after a prefix-cache hit, and with speculative decoding on (the
// drafts verified through the same masks).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_matcher.h"
#include "support/real_model.h"
#include "support/stream_output.h"

namespace kvserve {
namespace {

constexpr const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 24},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "city": {"type": "string", "maxLength": 24},
  "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3}},
  "required": ["name", "age", "city"]})";

class GrammarEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    loaded_ = testing::LoadRealModel("smollm2-135m");
    ASSERT_TRUE(loaded_.model && loaded_.tokenizer);
    cache_ = std::make_unique<GrammarCache>(GrammarVocab::FromTokenizer(*loaded_.tokenizer));
    auto schema = cache_->Get(GrammarSource::kJsonSchema, kSchema);
    ASSERT_TRUE(schema.ok()) << schema.message();
    schema_ = *schema;
    auto answer = cache_->Get(GrammarSource::kGbnf,
                              "root ::= (\"yes\" | \"no\") \", because \" [a-z ]{1,40} \".\"\n");
    ASSERT_TRUE(answer.ok()) << answer.message();
    answer_ = *answer;
  }

  std::vector<int32_t> Prompt(const std::string& user) const {
    return loaded_.tokenizer->Encode(
        "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n",
        /*add_special=*/false, /*parse_special=*/true);
  }

  // Constrained (greedy and seeded) and unconstrained requests on a few prompts.
  std::vector<Request> Requests() const {
    const std::vector<std::string> users = {
        "Repeat this record exactly: {\"name\": \"Ann Lee\", \"age\": 31, \"city\": \"Oslo\", "
        "\"pets\": [\"cat\", \"dog\"]}",
        "Invent a pet owner from Paris, as JSON.", "Is the sky blue? Answer and explain.",
        "Give me one JSON record of a student."};
    std::vector<Request> out;
    for (size_t i = 0; i < users.size(); ++i) {
      for (int variant = 0; variant < 3; ++variant) {
        Request r;
        r.id = "r" + std::to_string(i) + "-" + std::to_string(variant);
        r.prompt = Prompt(users[i]);
        r.max_tokens = 40;
        r.sampling.temperature = variant == 0 ? 0.0f : 0.9f;
        r.sampling.seed = 1000 + i * 10 + variant;
        if (variant < 2) r.grammar = i == 2 ? answer_ : schema_;
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  std::unique_ptr<Engine> NewEngine(SpecMethod spec) const {
    EngineOptions options{.n_threads = 2, .n_ctx = 512};
    options.spec.method = spec;
    options.spec.cost_gate = false;   // every draft verified
    options.spec.batch_tokens = 512;  // no back-off with 12 sequences
    auto engine = Engine::Create(*loaded_.model, *loaded_.tokenizer, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // Runs `requests` one after the other or all at once (ids made unique per run).
  static std::vector<testing::StreamOutput> Run(Engine& engine,
                                                const std::vector<Request>& requests,
                                                bool together) {
    static int run = 0;
    ++run;
    std::vector<testing::StreamOutput> out;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (Request r : requests) {
      r.id += "-run" + std::to_string(run);
      auto stream = engine.Submit(r);
      EXPECT_TRUE(stream.ok()) << stream.message();
      if (!stream.ok()) return out;
      if (together) {
        streams.push_back(*stream);
      } else {
        out.push_back(testing::CollectStream(**stream, std::chrono::seconds(120)));
      }
    }
    for (auto& s : streams) out.push_back(testing::CollectStream(*s, std::chrono::seconds(120)));
    return out;
  }

  testing::LoadedModel loaded_;
  std::unique_ptr<GrammarCache> cache_;
  std::shared_ptr<TokenMasker> schema_, answer_;
};

TEST_F(GrammarEngine, OutputsAreDocumentsAndTheSameAloneBatchedAndCached) {
  const std::vector<Request> requests = Requests();
  auto engine = NewEngine(SpecMethod::kNone);
  ASSERT_NE(engine, nullptr);
  const auto alone = Run(*engine, requests, /*together=*/false);
  const auto cached = Run(*engine, requests, /*together=*/false);  // prompts now prefix hits
  const auto batched = Run(*engine, requests, /*together=*/true);
  ASSERT_EQ(alone.size(), requests.size());
  ASSERT_EQ(batched.size(), requests.size());
  int whole = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(alone[i].tokens, cached[i].tokens) << requests[i].id;
    EXPECT_EQ(alone[i].tokens, batched[i].tokens) << requests[i].id;
    EXPECT_GT(cached[i].usage.cached_tokens, 0) << requests[i].id;
    if (!requests[i].grammar) continue;
    GrammarMatcher m(requests[i].grammar->grammar());
    EXPECT_TRUE(m.Accept(alone[i].text)) << requests[i].id << ": " << alone[i].text;
    if (alone[i].finish_reason == FinishReason::kStop) {
      EXPECT_TRUE(m.CanEnd()) << requests[i].id << ": " << alone[i].text;
      ++whole;
    }
  }
  EXPECT_GE(whole, 4) << "most constrained answers should finish as whole documents";
  EngineStats stats = engine->Stats();
  EXPECT_GT(stats.grammar_masked + stats.grammar_checked, 0u);
  std::printf("masks: %llu whole, %llu checked, %.1f ms\n",
              static_cast<unsigned long long>(stats.grammar_masked),
              static_cast<unsigned long long>(stats.grammar_checked), stats.grammar_mask_ms);
}

TEST_F(GrammarEngine, SpeculationChangesNoConstrainedToken) {
  const std::vector<Request> requests = Requests();
  auto plain = NewEngine(SpecMethod::kNone);
  auto spec = NewEngine(SpecMethod::kNgram);
  ASSERT_TRUE(plain && spec);
  const auto expected = Run(*plain, requests, /*together=*/true);
  const auto got = Run(*spec, requests, /*together=*/true);
  ASSERT_EQ(got.size(), expected.size());
  int drafted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << requests[i].id;
    if (requests[i].grammar) drafted += got[i].usage.drafted_tokens;
  }
  EXPECT_GT(drafted, 0) << "the constrained requests should have had drafts to verify";
}

}  // namespace
}  // namespace kvserve
