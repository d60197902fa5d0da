// End to end through the serving engine on the shared models: batching, prefix caching and
// preemption never change a request's tokens, and no block is leaked.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/stream_output.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded Load(const std::string& name) {
  Loaded l;
  auto model = LoadModel(testing::ModelPath(name), TestBackend());
  EXPECT_TRUE(model.ok()) << model.message();
  l.model = std::move(model).value();
  auto tokenizer = Tokenizer::FromGguf(l.model->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  l.tokenizer = std::move(tokenizer).value();
  return l;
}

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream) {
  return testing::CollectStream(stream, std::chrono::seconds(60));
}

std::vector<Output> RunAll(Engine& engine, const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    streams.push_back(*stream);
  }
  std::vector<Output> outputs;
  for (auto& stream : streams) outputs.push_back(Collect(*stream));
  return outputs;
}

// Random prompts of random lengths drawn from the vocabulary, BOS first when the model wants it.
std::vector<Request> RandomRequests(const Tokenizer& tok, int n, uint64_t seed, bool sampled) {
  std::mt19937_64 rng(seed);
  std::vector<Request> requests;
  for (int i = 0; i < n; ++i) {
    Request r;
    const int length = 1 + static_cast<int>(rng() % 40);
    if (tok.bos() >= 0) r.prompt.push_back(tok.bos());
    for (int j = 0; j < length; ++j)
      r.prompt.push_back(3 + static_cast<int>(rng() % (tok.n_vocab() - 3)));
    r.max_tokens = 4 + static_cast<int>(rng() % 24);
    r.ignore_eos = true;
    r.logprobs = true;
    r.sampling.temperature = sampled ? 0.9f : 0.0f;
    r.sampling.top_p = sampled ? 0.95f : 1.0f;
    r.sampling.seed = 1000 + i;
    requests.push_back(r);
  }
  return requests;
}

void ExpectNoBlocksReferenced(const Engine& engine) {
  // Stats are published after each step; the last finish may need one more loop turn.
  for (int i = 0; i < 100 && engine.Stats().blocks_used != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.blocks_used, 0);
  EXPECT_EQ(stats.blocks_used + stats.blocks_cached + stats.blocks_free, stats.blocks_total);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
}

class ConcurrencyTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(ConcurrencyTest, SixteenAtOnceEqualOneByOne) {
  const auto& [model_name, sampled] = GetParam();
  Loaded l = Load(model_name);
  const std::vector<Request> requests = RandomRequests(*l.tokenizer, 16, 7, sampled);
  EngineOptions options{.n_threads = 2,
                        .n_ctx = 128,
                        .max_num_seqs = 16,
                        .max_batched_tokens = 64,
                        .prefix_caching = false};
  std::vector<Output> alone;
  {
    auto engine = Engine::Create(*l.model, *l.tokenizer, options);
    ASSERT_TRUE(engine.ok()) << engine.message();
    for (const Request& r : requests) alone.push_back(RunAll(**engine, {r})[0]);
    ExpectNoBlocksReferenced(**engine);
  }
  auto engine = Engine::Create(*l.model, *l.tokenizer, options);
  ASSERT_TRUE(engine.ok());
  const std::vector<Output> together = RunAll(**engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs) << "request " << i;
    EXPECT_EQ(together[i].text, alone[i].text);
    EXPECT_EQ(together[i].finish_reason, FinishReason::kLength);
    EXPECT_EQ(static_cast<int>(together[i].tokens.size()), requests[i].max_tokens);
  }
  EXPECT_GT((*engine)->Stats().steps, 0u);
  ExpectNoBlocksReferenced(**engine);
}

INSTANTIATE_TEST_SUITE_P(Models, ConcurrencyTest,
                         ::testing::Combine(::testing::Values("stories260K.gguf",
                                                              "gpt2-tiny-f32.gguf"),
                                            ::testing::Bool()));

// The engine's greedy output equals the simple single-sequence path (and so llama.cpp's).
TEST(Engine, GreedyMatchesSequenceRunner) {
  Loaded l = Load("stories260K.gguf");
  const std::vector<int32_t> prompt = l.tokenizer->Encode("Once upon a time", true, false);
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> expected =
      testing::ReferenceGenerate(*l.model, *l.tokenizer, prompt, 40, greedy, true, 128);
  ASSERT_EQ(expected.size(), 40u);
  auto engine = Engine::Create(*l.model, *l.tokenizer, {.n_threads = 2, .n_ctx = 128});
  ASSERT_TRUE(engine.ok());
  Request r{.prompt = prompt, .max_tokens = 40, .ignore_eos = true};
  r.sampling.temperature = 0;
  EXPECT_EQ(RunAll(**engine, {r})[0].tokens, expected);
}

TEST(Engine, PrefixCacheHitGivesTheColdAnswer) {
  Loaded l = Load("stories260K.gguf");
  auto engine =
      Engine::Create(*l.model, *l.tokenizer, {.n_threads = 2, .n_ctx = 128, .block_size = 4});
  ASSERT_TRUE(engine.ok());
  Request r{
      .prompt = l.tokenizer->Encode("Once upon a time there was a big dog named Max", true, false),
      .max_tokens = 20,
      .ignore_eos = true,
      .logprobs = true};
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 42;
  const Output cold = RunAll(**engine, {r})[0];
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  const Output warm = RunAll(**engine, {r})[0];
  EXPECT_GT(warm.usage.cached_tokens, 0);
  EXPECT_EQ(warm.usage.cached_tokens % 4, 0);
  EXPECT_LT(warm.usage.cached_tokens, static_cast<int>(r.prompt.size()));
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_EQ(warm.logprobs, cold.logprobs);  // same logits, bit for bit
  // A different salt never shares.
  r.cache_salt = "tenant-b";
  const Output other = RunAll(**engine, {r})[0];
  EXPECT_EQ(other.usage.cached_tokens, 0);
  EXPECT_EQ(other.tokens, cold.tokens);
  const EngineStats stats = (*engine)->Stats();
  EXPECT_EQ(stats.prefix_queries_tokens, 3 * r.prompt.size());
  EXPECT_EQ(stats.prefix_hits_tokens, static_cast<uint64_t>(warm.usage.cached_tokens));
  ExpectNoBlocksReferenced(**engine);
}

TEST(Engine, MemoryPressurePreemptsAndStillAnswersExactly) {
  Loaded l = Load("stories260K.gguf");
  const std::vector<Request> requests = RandomRequests(*l.tokenizer, 8, 11, true);
  EngineOptions roomy{.n_threads = 2, .n_ctx = 128, .block_size = 4, .max_num_seqs = 8};
  std::vector<Output> expected;
  {
    auto engine = Engine::Create(*l.model, *l.tokenizer, roomy);
    ASSERT_TRUE(engine.ok());
    for (const Request& r : requests) expected.push_back(RunAll(**engine, {r})[0]);
  }
  EngineOptions tight = roomy;
  // 18 blocks of 4 tokens: enough for the longest request (41 + 27 tokens) but not for all 8.
  tight.kv_memory_bytes = KvCache::BytesPerBlock(l.model->kv_spec(), KvType::kF32, 4) * 18;
  auto engine = Engine::Create(*l.model, *l.tokenizer, tight);
  ASSERT_TRUE(engine.ok());
  const std::vector<Output> outputs = RunAll(**engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(outputs[i].tokens, expected[i].tokens) << "request " << i;
    EXPECT_EQ(outputs[i].finish_reason, FinishReason::kLength);
  }
  EXPECT_GT((*engine)->Stats().preemptions, 0u);
  ExpectNoBlocksReferenced(**engine);
}

TEST(Engine, RejectsWhatCanNeverFit) {
  Loaded l = Load("stories260K.gguf");
  auto engine = Engine::Create(*l.model, *l.tokenizer, {.n_threads = 1, .n_ctx = 64});
  ASSERT_TRUE(engine.ok());
  // The context holds prompt and completion together: 3 + 61 fills the 64 tokens exactly (and
  // yields all 61), one more can never fit.
  Request r{.prompt = {1, 2, 3}, .max_tokens = 62};
  auto too_long = (*engine)->Submit(r);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("62"), std::string::npos) << too_long.message();
  EXPECT_NE(too_long.message().find("64"), std::string::npos) << too_long.message();
  r.max_tokens = 61;
  r.ignore_eos = true;
  const Output fits = RunAll(**engine, {r})[0];
  EXPECT_EQ(fits.tokens.size(), 61u);
  EXPECT_EQ(fits.finish_reason, FinishReason::kLength);
  r.ignore_eos = false;
  r.max_tokens = 4;
  r.prompt = {1, 600};
  EXPECT_FALSE((*engine)->Submit(r).ok());
  r.prompt = {1, 2};
  r.sampling.top_p = 0;
  auto bad = (*engine)->Submit(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("top_p"), std::string::npos);
  r.prompt.clear();
  EXPECT_FALSE((*engine)->Submit(r).ok());
}

TEST(Engine, StopStringsAndTokensEndTheRequest) {
  Loaded l = Load("stories260K.gguf");
  auto engine = Engine::Create(*l.model, *l.tokenizer, {.n_threads = 2, .n_ctx = 128});
  ASSERT_TRUE(engine.ok());
  Request r{.prompt = l.tokenizer->Encode("Once upon a time", true, false), .max_tokens = 60};
  r.sampling.temperature = 0;
  const Output full = RunAll(**engine, {r})[0];
  ASSERT_NE(full.text.find("Lily"), std::string::npos) << full.text;
  r.stop = {"Lily"};
  const Output stopped = RunAll(**engine, {r})[0];
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find("Lily")));
  r.stop = {"ily. S"};  // spans several tokens
  const Output split = RunAll(**engine, {r})[0];
  EXPECT_EQ(split.finish_reason, FinishReason::kStop);
  EXPECT_EQ(split.text, full.text.substr(0, full.text.find("ily. S")));
  r.stop.clear();
  r.stop_token_ids = {full.tokens[3]};
  const Output by_id = RunAll(**engine, {r})[0];
  EXPECT_EQ(by_id.finish_reason, FinishReason::kStop);
  EXPECT_EQ(by_id.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 3));
  ExpectNoBlocksReferenced(**engine);
}

TEST(Engine, AbortFreesBlocks) {
  Loaded l = Load("stories260K.gguf");
  auto engine = Engine::Create(*l.model, *l.tokenizer, {.n_threads = 1, .n_ctx = 512});
  ASSERT_TRUE(engine.ok());
  Request r{.id = "long", .prompt = {1, 403, 407}, .max_tokens = 500, .ignore_eos = true};
  auto stream = (*engine)->Submit(r);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Next(std::chrono::seconds(30)).has_value());  // it is running
  (*engine)->Abort("long");
  const Output out = Collect(**stream);
  EXPECT_EQ(out.finish_reason, FinishReason::kAbort);
  ExpectNoBlocksReferenced(**engine);
}

TEST(Engine, TimeoutFinishesTheRequestAndFreesBlocks) {
  Loaded l = Load("stories260K.gguf");
  auto engine = Engine::Create(*l.model, *l.tokenizer, {.n_threads = 1, .n_ctx = 512});
  ASSERT_TRUE(engine.ok());
  // 500 tokens take far longer than 1 ms on any machine; the deadline ends the request early.
  Request r{.prompt = {1, 403, 407}, .max_tokens = 500, .ignore_eos = true, .timeout_s = 0.001};
  const Output out = RunAll(**engine, {r})[0];
  EXPECT_EQ(out.finish_reason, FinishReason::kTimeout);
  EXPECT_LT(out.tokens.size(), 500u);
  ExpectNoBlocksReferenced(**engine);
}

TEST(Engine, SessionKeepsBlocksPinnedUntilReleased) {
  Loaded l = Load("stories260K.gguf");
  auto engine =
      Engine::Create(*l.model, *l.tokenizer, {.n_threads = 2, .n_ctx = 128, .block_size = 4});
  ASSERT_TRUE(engine.ok());
  Request r{.prompt = l.tokenizer->Encode("Once upon a time there was", true, false),
            .max_tokens = 12,
            .ignore_eos = true,
            .session_id = "chat-1"};
  r.sampling.temperature = 0;
  const Output first = RunAll(**engine, {r})[0];
  for (int i = 0; i < 100 && (*engine)->Stats().sessions == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*engine)->Stats().sessions, 1);
  EXPECT_GT((*engine)->Stats().blocks_used, 0);  // pinned
  // The next turn extends the conversation and reuses it.
  r.prompt.insert(r.prompt.end(), first.tokens.begin(), first.tokens.end());
  r.prompt.push_back(l.tokenizer->Encode(" The", false, false)[0]);
  const Output second = RunAll(**engine, {r})[0];
  EXPECT_GE(second.usage.cached_tokens, 16);
  EXPECT_TRUE((*engine)->ReleaseSession("chat-1"));
  EXPECT_FALSE((*engine)->ReleaseSession("chat-1"));
  // A session is known as soon as its request reports the finish: deleting right away works.
  for (int i = 0; i < 20; ++i) {
    r.session_id = "quick-" + std::to_string(i);
    RunAll(**engine, {r});
    EXPECT_TRUE((*engine)->ReleaseSession(r.session_id)) << r.session_id;
  }
  ExpectNoBlocksReferenced(**engine);
}

}  // namespace
}  // namespace kvserve
