// The serving engine's core (sampling, stop rules, sessions, expiry, abort, preemption, prefix-
// cache tenants) on the fake model of support/fake_model.h: no model file, no vocabulary file,
// each test in milliseconds. Every expectation comes from the fake's rule (FakeLogits on the token
// list, sampled with a fresh Sampler of the request's parameters), never from another engine run,
// so a cache, batching or scheduling bug shows up as different tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "support/fake_model.h"
#include "support/stream_output.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::FakeGreedyNext;
using testing::FakeLogits;
using testing::FakeModel;
using testing::FakeModelOptions;
using testing::FakePiece;
using testing::kFakeBos;
using testing::kFakeEos;
using testing::kFakeEosTrigger;
using testing::kFakeFirstNormal;
using testing::kFakeNormalTokens;
using testing::kFakeVocab;

constexpr auto kEventTimeout = std::chrono::seconds(20);

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream) { return testing::CollectStream(stream, kEventTimeout); }

// Submits every request; a refusal fails the test and the streams stop at it.
std::vector<std::shared_ptr<RequestStream>> SubmitAll(Engine& engine,
                                                      const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) break;
    streams.push_back(*stream);
  }
  return streams;
}

std::vector<Output> CollectAll(const std::vector<std::shared_ptr<RequestStream>>& streams) {
  std::vector<Output> outputs;
  for (const auto& stream : streams) outputs.push_back(Collect(*stream));
  return outputs;
}

std::vector<Output> RunAll(Engine& engine, const std::vector<Request>& requests) {
  const auto streams = SubmitAll(engine, requests);
  if (streams.size() != requests.size()) return {};
  return CollectAll(streams);
}

Output RunOne(Engine& engine, const Request& request) {
  std::vector<Output> outputs = RunAll(engine, {request});
  return outputs.empty() ? Output{} : outputs[0];
}

// What the engine must produce for `r` (stop strings aside), from the fake's rule alone: greedy
// takes the argmax, sampling draws from a fresh Sampler of the request's parameters (its own
// random stream, as the engine gives each request).
Output Expected(const Request& r, int n_ctx, int n_layers = 2) {
  Output out;
  std::vector<int32_t> history = r.prompt;
  Sampler sampler(r.sampling, kFakeVocab);
  for (;;) {
    int32_t token;
    float logprob = 0.0f;
    if (r.sampling.temperature == 0.0f) {
      token = FakeGreedyNext(history, n_layers);
    } else {
      const SampleResult s = sampler.Sample(FakeLogits(history, n_layers), history);
      token = s.token;
      logprob = s.logprob;
    }
    const bool stop_id = std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) !=
                         r.stop_token_ids.end();
    if ((!r.ignore_eos && token == kFakeEos) || stop_id) {
      out.finish_reason = FinishReason::kStop;
      return out;
    }
    out.tokens.push_back(token);
    out.logprobs.push_back(logprob);
    out.text += FakePiece(token);
    const int held = static_cast<int>(history.size());
    history.push_back(token);
    if (static_cast<int>(out.tokens.size()) >= r.max_tokens || held >= n_ctx) {
      out.finish_reason = FinishReason::kLength;
      return out;
    }
  }
}

std::vector<int32_t> RandomPrompt(std::mt19937_64& rng, int length) {
  std::vector<int32_t> prompt = {kFakeBos};
  for (int i = 1; i < length; ++i) {
    prompt.push_back(kFakeFirstNormal + static_cast<int32_t>(rng() % kFakeNormalTokens));
  }
  return prompt;
}

// n requests of 1..40 prompt tokens and 4..27 new ones; each odd request shares its first 12
// prompt tokens with the one before (prefix blocks shared between live sequences). Sampled
// requests mix temperature, top_k and top_p, and half of them stop at EOS.
std::vector<Request> RandomRequests(int n, uint64_t seed, bool sampled) {
  std::mt19937_64 rng(seed);
  std::vector<Request> requests;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = "r" + std::to_string(i);
    r.prompt = RandomPrompt(rng, 1 + static_cast<int>(rng() % 40));
    if (i % 2 == 1 && requests.back().prompt.size() >= 12 && r.prompt.size() >= 12) {
      std::copy(requests.back().prompt.begin(), requests.back().prompt.begin() + 12,
                r.prompt.begin());
    }
    r.max_tokens = 4 + static_cast<int>(rng() % 24);
    r.ignore_eos = !sampled || i % 2 == 0;
    r.logprobs = true;
    r.sampling.temperature = sampled ? 0.6f + 0.1f * static_cast<float>(i % 5) : 0.0f;
    r.sampling.top_k = sampled && i % 3 == 0 ? 20 : 0;
    r.sampling.top_p = sampled && i % 3 == 1 ? 0.9f : 1.0f;
    r.sampling.seed = 1000 + i;
    requests.push_back(r);
  }
  return requests;
}

Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r{.prompt = std::move(prompt), .max_tokens = max_tokens};
  r.sampling.temperature = 0.0f;
  return r;
}

template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Stats are published after each step, so right after a finish event they may still show the
// request running: waits for the snapshot of an idle engine.
bool WaitIdle(const Engine& engine) {
  return WaitFor([&] {
    const EngineStats stats = engine.Stats();
    return stats.running == 0 && stats.waiting == 0;
  });
}

void ExpectNoBlocksReferenced(const Engine& engine) {
  WaitFor([&] { return engine.Stats().blocks_used == 0 && engine.Stats().running == 0; });
  const EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.blocks_used, 0);
  EXPECT_EQ(stats.blocks_used + stats.blocks_cached + stats.blocks_free, stats.blocks_total);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
}

// Holds the hold_at-th Forward call (1-based) until Open(), so a test can act while that step is
// in flight. Never holds longer than 10 s, so a failing test cannot hang the engine's join.
class StepGate {
 public:
  explicit StepGate(int hold_at) : hold_at_(hold_at) {}
  void OnForward() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (++calls_ != hold_at_) return;
    held_ = true;
    changed_.notify_all();
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }
  bool WaitHeld() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return held_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int hold_at_;
  int calls_ = 0;
  bool held_ = false;
  bool open_ = false;
};

class EngineCore : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = testing::FakeTokenizer(); }
  std::unique_ptr<Engine> MakeEngine(const FakeModel& model, const EngineOptions& options) {
    auto engine = Engine::Create(model, *tokenizer_, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }
  // Runs `requests` on an engine of the fake model with `options`, all submitted while a
  // one-token blocker's first step is held, so they wait for the same step whatever the speed of
  // the machine (under ThreadSanitizer, or on a loaded machine, the engine thread otherwise
  // stepped while the test was still submitting, and admitted them over many steps).
  // `after(engine)` runs once every output is in, before the engine stops.
  std::vector<Output> RunAllAtOnce(const EngineOptions& options,
                                   const std::vector<Request>& requests,
                                   const std::function<void(Engine&)>& after = {}) {
    StepGate gate(1);
    auto gated = FakeModel::Create(TestBackend(), {.on_forward = [&] { gate.OnForward(); }});
    auto engine = MakeEngine(*gated, options);
    if (engine == nullptr) return {};
    auto blocked = engine->Submit(Greedy({kFakeBos, 9}, 1));
    EXPECT_TRUE(blocked.ok()) << blocked.message();
    EXPECT_TRUE(gate.WaitHeld());
    const auto streams = SubmitAll(*engine, requests);
    gate.Open();
    if (!blocked.ok() || streams.size() != requests.size()) return {};
    EXPECT_EQ(Collect(**blocked).tokens.size(), 1u);
    std::vector<Output> outputs = CollectAll(streams);
    if (after) after(*engine);
    return outputs;
  }

  std::unique_ptr<FakeModel> model_ = FakeModel::Create(TestBackend());
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(EngineCore, TheFakeTokenizerSpellsTheVocabulary) {
  EXPECT_EQ(tokenizer_->n_vocab(), kFakeVocab);
  EXPECT_EQ(tokenizer_->bos(), kFakeBos);
  EXPECT_TRUE(tokenizer_->IsEndOfGeneration(kFakeEos));
  EXPECT_FALSE(tokenizer_->IsEndOfGeneration(kFakeEosTrigger));
  const std::vector<int32_t> ids = tokenizer_->Encode("abZ7.", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{kFakeBos, 3, 4, 54, 62, kFakeEosTrigger}));
  EXPECT_EQ(tokenizer_->Decode(ids), "abZ7.");
}

// The rule itself: the next token depends on every earlier token and on its position.
TEST_F(EngineCore, TheFakeRuleDependsOnTheWholeHistory) {
  std::mt19937_64 rng(5);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 30);
  const std::vector<float> base = FakeLogits(prompt, 2);
  for (size_t i = 0; i < prompt.size(); ++i) {
    std::vector<int32_t> changed = prompt;
    changed[i] = changed[i] == 3 ? 4 : 3;
    EXPECT_NE(FakeLogits(changed, 2), base) << "position " << i;
  }
  std::vector<int32_t> swapped = prompt;
  std::swap(swapped[3], swapped[4]);
  if (swapped != prompt) {
    EXPECT_NE(FakeLogits(swapped, 2), base);
  }
  std::vector<int32_t> triggered = prompt;
  triggered.push_back(kFakeEosTrigger);
  EXPECT_EQ(FakeGreedyNext(triggered, 2), kFakeEos);
}

class EngineCoreBatching : public EngineCore, public ::testing::WithParamInterface<bool> {};

// Greedy or seeded, a request gives the rule's tokens (and the sampler's logprobs, bit for bit)
// whether it runs alone or among 16, with chunked prefill and shared prefix blocks.
TEST_P(EngineCoreBatching, SixteenAtOnceEqualOneByOneEqualTheRule) {
  const bool sampled = GetParam();
  const std::vector<Request> requests = RandomRequests(16, sampled ? 8 : 7, sampled);
  const EngineOptions options{
      .n_threads = 1, .n_ctx = 128, .block_size = 4, .max_num_seqs = 16, .max_batched_tokens = 48};
  std::vector<Output> alone;
  {
    auto engine = MakeEngine(*model_, options);
    ASSERT_NE(engine, nullptr);
    for (const Request& r : requests) alone.push_back(RunOne(*engine, r));
    ExpectNoBlocksReferenced(*engine);
  }
  // Together: all 16 wait for the same step (RunAllAtOnce).
  EngineStats stats;
  const std::vector<Output> together = RunAllAtOnce(options, requests, [&](Engine& engine) {
    stats = engine.Stats();
    ExpectNoBlocksReferenced(engine);
  });
  ASSERT_EQ(together.size(), requests.size());
  int stopped_at_eos = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Output expected = Expected(requests[i], options.n_ctx);
    EXPECT_EQ(alone[i].tokens, expected.tokens) << "request " << i << " alone";
    EXPECT_EQ(together[i].tokens, expected.tokens) << "request " << i << " among 16";
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs) << "request " << i;
    if (sampled) {
      EXPECT_EQ(together[i].logprobs, expected.logprobs) << "request " << i;
    }
    EXPECT_EQ(together[i].text, expected.text) << "request " << i;
    EXPECT_EQ(together[i].finish_reason, expected.finish_reason) << "request " << i;
    EXPECT_EQ(together[i].usage.completion_tokens, static_cast<int>(expected.tokens.size()));
    stopped_at_eos += expected.finish_reason == FinishReason::kStop;
  }
  EXPECT_GT(stats.prefix_hits_tokens, 0u);  // the shared prefixes were found
  // All 16 were admitted together: far fewer steps than one request after another (the blocker's
  // step included).
  EXPECT_LT(stats.steps, 60u);
  if (!sampled) {
    EXPECT_EQ(stopped_at_eos, 0);  // greedy never meets the trigger
  }
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, EngineCoreBatching, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Seeded" : "Greedy"; });

TEST_F(EngineCore, SeedsAndTemperatureChangeTheTokens) {
  std::mt19937_64 rng(3);
  Request r = Greedy(RandomPrompt(rng, 10), 24);
  r.ignore_eos = true;
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 64});
  ASSERT_NE(engine, nullptr);
  const Output greedy = RunOne(*engine, r);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 1;
  const Output seed1 = RunOne(*engine, r);
  const Output seed1_again = RunOne(*engine, r);
  r.sampling.seed = 2;
  const Output seed2 = RunOne(*engine, r);
  EXPECT_EQ(seed1.tokens, seed1_again.tokens);
  EXPECT_NE(seed1.tokens, greedy.tokens);
  EXPECT_NE(seed1.tokens, seed2.tokens);
  EXPECT_EQ(seed2.tokens, Expected(r, 64).tokens);
  ExpectNoBlocksReferenced(*engine);
}

TEST_F(EngineCore, StopTokenIdsEndTheRequestUnemitted) {
  std::mt19937_64 rng(11);
  Request r = Greedy(RandomPrompt(rng, 9), 30);
  const Output full = Expected(r, 128);
  ASSERT_EQ(full.tokens.size(), 30u);
  // The first generated token after the third that has not appeared before.
  size_t k = 3;
  while (k < full.tokens.size() && std::find(full.tokens.begin(), full.tokens.begin() + k,
                                             full.tokens[k]) != full.tokens.begin() + k) {
    ++k;
  }
  ASSERT_LT(k, full.tokens.size());
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128});
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(RunOne(*engine, r).tokens, full.tokens);
  r.stop_token_ids = {full.tokens[k], kFakeVocab - 1};
  const Output stopped = RunOne(*engine, r);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + k));
  EXPECT_EQ(stopped.text, full.text.substr(0, k));
  EXPECT_EQ(stopped.usage.completion_tokens, static_cast<int>(k));
  ExpectNoBlocksReferenced(*engine);
}

// Every token is one character, so a stop string of three characters spans three tokens: its
// text is never emitted (the token events are, with the text held back), and a stop string that
// only starts at the end is released when max_tokens ends the request.
TEST_F(EngineCore, StopStringsSplitAcrossTokens) {
  std::mt19937_64 rng(12);
  Request r = Greedy(RandomPrompt(rng, 6), 30);
  const Output full = Expected(r, 128);
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128});
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(RunOne(*engine, r).text, full.text);

  const std::string stop = full.text.substr(10, 3);
  const size_t at = full.text.find(stop);
  r.stop = {"never-there", stop};
  const Output stopped = RunOne(*engine, r);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, at));
  EXPECT_EQ(stopped.tokens,
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + at + stop.size()));

  // The last two characters plus one more: held back to the end, then flushed.
  r.stop = {full.text.substr(full.text.size() - 2) + "!"};
  const Output tail = RunOne(*engine, r);
  EXPECT_EQ(tail.finish_reason, FinishReason::kLength);
  EXPECT_EQ(tail.text, full.text);
  ExpectNoBlocksReferenced(*engine);
}

TEST_F(EngineCore, MaxTokensEndsWithLength) {
  std::mt19937_64 rng(13);
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128});
  ASSERT_NE(engine, nullptr);
  for (int max_tokens : {1, 2, 7, 40}) {
    const Request r = Greedy(RandomPrompt(rng, 5), max_tokens);
    const Output out = RunOne(*engine, r);
    EXPECT_EQ(out.finish_reason, FinishReason::kLength);
    EXPECT_EQ(static_cast<int>(out.tokens.size()), max_tokens);
    EXPECT_EQ(out.tokens, Expected(r, 128).tokens);
    EXPECT_EQ(out.usage.prompt_tokens, 5);
    EXPECT_EQ(out.usage.completion_tokens, max_tokens);
  }
  ExpectNoBlocksReferenced(*engine);
}

// max_tokens 0 is accepted by Submit; it must then generate nothing (or Submit must refuse it).
// Fails today: the sequence is scheduled and StopChecker::Push appends the first sampled token
// before it checks max_tokens, so one token comes out (`kvserve run -n 0` prints one as well).
TEST_F(EngineCore, MaxTokensZeroGeneratesNothing) {
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128});
  ASSERT_NE(engine, nullptr);
  auto stream = engine->Submit(Greedy({kFakeBos, 5, 6}, 0));
  if (stream.ok()) {
    const Output out = Collect(**stream);
    EXPECT_TRUE(out.tokens.empty()) << out.tokens.size() << " tokens for max_tokens 0";
    EXPECT_EQ(out.usage.completion_tokens, 0);
  }
  ExpectNoBlocksReferenced(*engine);
}

// The one context rule (engine, CLI and server): prompt and completion together within n_ctx.
TEST(ContextRule, PromptAndCompletionShareTheContext) {
  EXPECT_EQ(FitContext(8, 24, 32), ContextFit::kFits);
  EXPECT_EQ(FitContext(8, 25, 32), ContextFit::kTooLong);
  EXPECT_EQ(FitContext(32, 0, 32), ContextFit::kFits);
  EXPECT_EQ(FitContext(31, 1, 32), ContextFit::kFits);
  EXPECT_EQ(FitContext(32, 1, 32), ContextFit::kPromptFills);
  EXPECT_EQ(FitContext(40, 0, 32), ContextFit::kPromptFills);
  EXPECT_EQ(FitContext(1, int64_t{1} << 40, 32), ContextFit::kTooLong);
  EXPECT_EQ(CompletionRoom(8, 32), 24);
  EXPECT_EQ(CompletionRoom(32, 32), 0);
  EXPECT_EQ(CompletionRoom(40, 32), 0);
}

// The context holds the prompt and the completion together (FitContext): prompt + max_tokens <=
// n_ctx fits, one more is refused with both numbers; a prompt that fills the context leaves no
// room.
TEST_F(EngineCore, TheContextHoldsPromptAndCompletion) {
  constexpr int kCtx = 32;
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = kCtx, .block_size = 4});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(14);
  Request r = Greedy(RandomPrompt(rng, 8), kCtx - 8);
  const Output fits = RunOne(*engine, r);
  EXPECT_EQ(fits.finish_reason, FinishReason::kLength);
  EXPECT_EQ(fits.tokens.size(), 24u);
  EXPECT_EQ(fits.tokens, Expected(r, kCtx).tokens);

  r.max_tokens = kCtx - 8 + 1;
  auto too_long = engine->Submit(r);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("25"), std::string::npos) << too_long.message();
  EXPECT_NE(too_long.message().find("32"), std::string::npos) << too_long.message();

  // A prompt one short of the context gets its one token; a full one gets none.
  Request last = Greedy(RandomPrompt(rng, kCtx - 1), 1);
  const Output one = RunOne(*engine, last);
  EXPECT_EQ(one.finish_reason, FinishReason::kLength);
  EXPECT_EQ(one.tokens, Expected(last, kCtx).tokens);
  EXPECT_EQ(one.tokens.size(), 1u);
  last.prompt.push_back(5);
  EXPECT_FALSE(engine->Submit(last).ok());
  ExpectNoBlocksReferenced(*engine);
}

// A prompt ending in the trigger makes EOS the greedy next token: the request stops without a
// token, unless ignore_eos, when EOS is emitted (as "") and generation goes on from it.
TEST_F(EngineCore, EndOfGenerationAndIgnoreEos) {
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 64});
  ASSERT_NE(engine, nullptr);
  Request r = Greedy({kFakeBos, 10, 11, 12, kFakeEosTrigger}, 8);
  const Output stopped = RunOne(*engine, r);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(stopped.tokens.empty());
  EXPECT_EQ(stopped.text, "");
  EXPECT_EQ(stopped.usage.completion_tokens, 0);

  r.ignore_eos = true;
  const Output ignored = RunOne(*engine, r);
  const Output expected = Expected(r, 64);
  EXPECT_EQ(ignored.finish_reason, FinishReason::kLength);
  ASSERT_EQ(ignored.tokens.size(), 8u);
  EXPECT_EQ(ignored.tokens[0], kFakeEos);
  EXPECT_EQ(ignored.tokens, expected.tokens);
  EXPECT_EQ(ignored.text, expected.text);

  // A stop token id still stops an ignore_eos request.
  r.stop_token_ids = {kFakeEos};
  EXPECT_EQ(RunOne(*engine, r).finish_reason, FinishReason::kStop);
  ExpectNoBlocksReferenced(*engine);
}

// The abort lands while step 3 is in flight: that step's token is the last, no further forward
// runs, and the blocks are free at the next published stats. A waiting request aborts too.
TEST_F(EngineCore, AbortFreesBlocksWithinAStep) {
  StepGate gate(3);
  auto model = FakeModel::Create(TestBackend(), {.on_forward = [&] { gate.OnForward(); }});
  auto engine = MakeEngine(*model, {.n_threads = 1, .n_ctx = 512, .max_num_seqs = 1});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(15);
  Request r = Greedy(RandomPrompt(rng, 20), 400);
  r.id = "long";
  r.ignore_eos = true;
  auto stream = engine->Submit(r);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate.WaitHeld());
  Request queued = Greedy({kFakeBos, 7}, 5);
  queued.id = "queued";
  auto queued_stream = engine->Submit(queued);
  ASSERT_TRUE(queued_stream.ok());
  EXPECT_GT(engine->Stats().blocks_used, 0);
  engine->Abort("long");
  engine->Abort("queued");
  engine->Abort("no-such-request");
  gate.Open();
  const Output out = Collect(**stream);
  EXPECT_EQ(out.finish_reason, FinishReason::kAbort);
  const std::vector<int32_t> expected = Expected(r, 512).tokens;
  EXPECT_EQ(out.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + 3));
  const Output queued_out = Collect(**queued_stream);
  EXPECT_EQ(queued_out.finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(queued_out.tokens.empty());
  ExpectNoBlocksReferenced(*engine);
  EXPECT_EQ(model->forwards(), 3);
}

// The first step takes 30 ms; a 10 ms deadline ends its request after at most that step's token,
// while a request without one runs on to its end.
TEST_F(EngineCore, TimeoutFinishesTheRequest) {
  std::atomic<int> calls{0};
  auto model = FakeModel::Create(TestBackend(), {.on_forward = [&] {
                                   if (calls++ == 0) {
                                     std::this_thread::sleep_for(std::chrono::milliseconds(30));
                                   }
                                 }});
  auto engine = MakeEngine(*model, {.n_threads = 1, .n_ctx = 256});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(16);
  Request late = Greedy(RandomPrompt(rng, 10), 200);
  late.timeout_s = 0.01;
  const Request patient = Greedy(RandomPrompt(rng, 10), 20);
  const std::vector<Output> outs = RunAll(*engine, {late, patient});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kTimeout);
  EXPECT_LE(outs[0].tokens.size(), 1u);
  EXPECT_EQ(outs[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(outs[1].tokens, Expected(patient, 256).tokens);
  ExpectNoBlocksReferenced(*engine);
}

// A session's conversation stays pinned while other requests churn through the whole pool, so
// the next turn finds all of it in the prefix cache and answers as a cold run; without the
// session the churn evicts it. ReleaseSession frees the pinned blocks.
TEST_F(EngineCore, SessionsPinBlocksUntilReleased) {
  const uint64_t block_bytes = KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 4);
  const EngineOptions options{
      .n_threads = 1, .n_ctx = 64, .block_size = 4, .kv_memory_bytes = 20 * block_bytes};
  std::mt19937_64 rng(17);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 13);
  std::vector<Request> churn;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = RandomPrompt(rng, 40);
    p[1] = kFakeEosTrigger;  // never a prefix of the conversation
    churn.push_back(Greedy(std::move(p), 16));
  }

  for (const bool with_session : {true, false}) {
    SCOPED_TRACE(with_session ? "with session" : "without session");
    auto engine = MakeEngine(*model_, options);
    ASSERT_NE(engine, nullptr);
    Request turn = Greedy(prompt, 12);
    if (with_session) turn.session_id = "chat-1";
    const Output first = RunOne(*engine, turn);
    EXPECT_EQ(first.tokens, Expected(turn, 64).tokens);
    if (with_session) {
      // 13 + 12 tokens, 24 of them stored: 6 full blocks pinned.
      ASSERT_TRUE(WaitIdle(*engine));
      EXPECT_EQ(engine->Stats().sessions, 1);
      EXPECT_EQ(engine->Stats().blocks_used, 6);
    }
    for (const Request& c : churn) EXPECT_EQ(RunOne(*engine, c).tokens, Expected(c, 64).tokens);

    turn.prompt.insert(turn.prompt.end(), first.tokens.begin(), first.tokens.end());
    turn.prompt.push_back(9);
    const Output second = RunOne(*engine, turn);
    EXPECT_EQ(second.usage.cached_tokens, with_session ? 24 : 0);
    EXPECT_EQ(second.tokens, Expected(turn, 64).tokens);
    if (with_session) {
      auto cold = MakeEngine(*model_, options);
      ASSERT_NE(cold, nullptr);
      Request cold_turn = turn;
      cold_turn.session_id.clear();
      const Output cold_out = RunOne(*cold, cold_turn);
      EXPECT_EQ(cold_out.usage.cached_tokens, 0);
      EXPECT_EQ(second.tokens, cold_out.tokens);
      EXPECT_TRUE(WaitFor([&] { return engine->Stats().blocks_used > 0; }));
      EXPECT_TRUE(engine->ReleaseSession("chat-1"));
      EXPECT_FALSE(engine->ReleaseSession("chat-1"));
      EXPECT_TRUE(WaitFor([&] { return engine->Stats().sessions == 0; }));
    } else {
      EXPECT_FALSE(engine->ReleaseSession("chat-1"));
    }
    ExpectNoBlocksReferenced(*engine);
  }
}

// A session nobody continues is released after session_ttl_s, not before.
TEST_F(EngineCore, SessionsExpire) {
  constexpr double kTtl = 0.15;
  auto engine =
      MakeEngine(*model_, {.n_threads = 1, .n_ctx = 64, .block_size = 4, .session_ttl_s = kTtl});
  ASSERT_NE(engine, nullptr);
  Request r = Greedy({kFakeBos, 20, 21, 22, 23, 24, 25, 26, 27}, 8);
  r.session_id = "short-lived";
  const Output out = RunOne(*engine, r);
  ASSERT_TRUE(WaitIdle(*engine));
  EXPECT_EQ(engine->Stats().sessions, 1);
  EXPECT_EQ(engine->Stats().blocks_used, 4);  // 9 + 8 tokens, 16 stored: 4 full blocks
  EXPECT_TRUE(WaitFor([&] { return engine->Stats().sessions == 0; }));
  const double pinned_for =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - out.finish_time).count();
  EXPECT_GE(pinned_for, kTtl - 0.01);  // pinned a moment before the finish event
  EXPECT_FALSE(engine->ReleaseSession("short-lived"));
  ExpectNoBlocksReferenced(*engine);
}

// Pinned sessions may hold at most max_pinned_fraction of the pool: pinning a third session of 4
// blocks into a 10-block allowance releases the oldest.
TEST_F(EngineCore, PinnedSessionsStayWithinTheirShareOfThePool) {
  const uint64_t block_bytes = KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 4);
  auto engine = MakeEngine(*model_, {.n_threads = 1,
                                     .n_ctx = 64,
                                     .block_size = 4,
                                     .kv_memory_bytes = 20 * block_bytes,
                                     .max_pinned_fraction = 0.5});
  ASSERT_NE(engine, nullptr);
  for (int i = 0; i < 3; ++i) {
    Request r = Greedy({kFakeBos, 10 + i, 11, 12, 13, 14, 15, 16, 17}, 8);  // 16 stored: 4 blocks
    r.session_id = "s" + std::to_string(i);
    RunOne(*engine, r);
  }
  ASSERT_TRUE(WaitIdle(*engine));
  EXPECT_EQ(engine->Stats().sessions, 2);
  EXPECT_EQ(engine->Stats().blocks_used, 8);
  EXPECT_FALSE(engine->ReleaseSession("s0"));  // the oldest went first
  EXPECT_TRUE(engine->ReleaseSession("s1"));
  EXPECT_TRUE(engine->ReleaseSession("s2"));
  ExpectNoBlocksReferenced(*engine);
}

// A request whose prompt needs blocks a pinned session holds is admitted once the engine
// releases that session (nothing else is running), and answers by the rule.
TEST_F(EngineCore, AdmissionReleasesPinnedSessionsWhenNothingElseFits) {
  const uint64_t block_bytes = KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 4);
  auto engine = MakeEngine(
      *model_, {.n_threads = 1, .n_ctx = 64, .block_size = 4, .kv_memory_bytes = 20 * block_bytes});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(24);
  Request chat = Greedy(RandomPrompt(rng, 13), 12);  // 24 stored: 6 blocks pinned
  chat.session_id = "chat";
  RunOne(*engine, chat);
  ASSERT_TRUE(WaitIdle(*engine));
  EXPECT_EQ(engine->Stats().sessions, 1);
  EXPECT_EQ(engine->Stats().blocks_used, 6);
  const Request big = Greedy(RandomPrompt(rng, 60), 4);  // 15 blocks for the prompt, 14 free
  const Output out = RunOne(*engine, big);
  EXPECT_EQ(out.tokens, Expected(big, 64).tokens);
  EXPECT_TRUE(WaitFor([&] { return engine->Stats().sessions == 0; }));
  EXPECT_FALSE(engine->ReleaseSession("chat"));
  ExpectNoBlocksReferenced(*engine);
}

class EngineCorePreemption : public EngineCore, public ::testing::WithParamInterface<bool> {};

// Too few blocks for all 8 requests at once: the newest are preempted and recomputed, and every
// request still gets exactly the rule's tokens.
TEST_P(EngineCorePreemption, TightMemoryGivesTheSameTokens) {
  const bool prefix_caching = GetParam();
  const std::vector<Request> requests = RandomRequests(8, 11, true);
  EngineOptions roomy{.n_threads = 1,
                      .n_ctx = 128,
                      .block_size = 4,
                      .max_num_seqs = 8,
                      .prefix_caching = prefix_caching};
  std::vector<Output> unconstrained;
  {
    auto engine = MakeEngine(*model_, roomy);
    ASSERT_NE(engine, nullptr);
    unconstrained = RunAll(*engine, requests);
    EXPECT_EQ(engine->Stats().preemptions, 0u);
  }
  EngineOptions tight = roomy;
  // 18 blocks of 4 tokens: enough for the longest request (at most 40 + 26 stored tokens), not
  // for all 8 at once.
  tight.kv_memory_bytes = KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 4) * 18;
  // All 8 compete for the pool from the same step on (RunAllAtOnce): on a loaded machine the
  // engine otherwise finished the first requests before the last arrived, and nothing was
  // preempted.
  uint64_t preemptions = 0;
  const std::vector<Output> outputs = RunAllAtOnce(tight, requests, [&](Engine& engine) {
    preemptions = engine.Stats().preemptions;
    ExpectNoBlocksReferenced(engine);
  });
  ASSERT_EQ(outputs.size(), requests.size());
  ASSERT_EQ(unconstrained.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Output expected = Expected(requests[i], 128);
    EXPECT_EQ(outputs[i].tokens, expected.tokens) << "request " << i;
    EXPECT_EQ(outputs[i].logprobs, expected.logprobs) << "request " << i;
    EXPECT_EQ(unconstrained[i].tokens, expected.tokens) << "request " << i;
    EXPECT_EQ(outputs[i].finish_reason, expected.finish_reason) << "request " << i;
  }
  EXPECT_GT(preemptions, 0u);
}

INSTANTIATE_TEST_SUITE_P(PrefixCaching, EngineCorePreemption, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Cached" : "Uncached"; });

// The fake's rows are small integers, exact in every KV type: each gives the rule's tokens.
TEST_F(EngineCore, EveryKvTypeGivesTheRulesTokens) {
  const std::vector<Request> requests = RandomRequests(4, 23, true);
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    SCOPED_TRACE(KvTypeName(type));
    auto engine =
        MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128, .kv_type = type, .block_size = 4});
    ASSERT_NE(engine, nullptr);
    const std::vector<Output> outputs = RunAll(*engine, requests);
    ASSERT_EQ(outputs.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(outputs[i].tokens, Expected(requests[i], 128).tokens) << "request " << i;
    }
    ExpectNoBlocksReferenced(*engine);
  }
}

// The no-cache baseline recomputes every sequence from position 0 each step: same tokens.
TEST_F(EngineCore, RecomputeBaselineGivesTheSameTokens) {
  const std::vector<Request> requests = RandomRequests(4, 21, false);
  auto engine =
      MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128, .block_size = 4, .recompute = true});
  ASSERT_NE(engine, nullptr);
  const int64_t before = model_->tokens_forwarded();
  const std::vector<Output> outputs = RunAll(*engine, requests);
  ASSERT_EQ(outputs.size(), requests.size());
  int64_t incremental = 0;  // tokens an incremental engine would forward
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(outputs[i].tokens, Expected(requests[i], 128).tokens) << "request " << i;
    incremental += static_cast<int64_t>(requests[i].prompt.size()) + requests[i].max_tokens - 1;
  }
  EXPECT_GT(model_->tokens_forwarded() - before, incremental);
  EXPECT_EQ(engine->Stats().prefix_hits_tokens, 0u);
  ExpectNoBlocksReferenced(*engine);
}

// Requests with different cache salts never share blocks, even with the same prompt; the same
// salt does.
TEST_F(EngineCore, CacheSaltsSeparateTenants) {
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128, .block_size = 4});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(18);
  Request r = Greedy(RandomPrompt(rng, 22), 10);
  const Output expected = Expected(r, 128);
  r.cache_salt = "tenant-a";
  const Output a = RunOne(*engine, r);
  r.cache_salt = "tenant-b";
  const Output b = RunOne(*engine, r);
  r.cache_salt = "";
  const Output unsalted = RunOne(*engine, r);
  r.cache_salt = "tenant-a";
  const Output a_again = RunOne(*engine, r);
  EXPECT_EQ(a.usage.cached_tokens, 0);
  EXPECT_EQ(b.usage.cached_tokens, 0);
  EXPECT_EQ(unsalted.usage.cached_tokens, 0);
  EXPECT_EQ(a_again.usage.cached_tokens, 20);  // 5 full blocks; the last token is computed
  for (const Output* out : {&a, &b, &unsalted, &a_again}) {
    EXPECT_EQ(out->tokens, expected.tokens);
  }
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.prefix_queries_tokens, 4 * r.prompt.size());
  EXPECT_EQ(stats.prefix_hits_tokens, 20u);
  ExpectNoBlocksReferenced(*engine);
}

// While tenant a's prompt is cached, tenant b and tenant a submit it again at the same time: only
// a's second request is served from the cache.
TEST_F(EngineCore, ConcurrentTenantsShareOnlyTheirOwnPrefix) {
  auto engine = MakeEngine(*model_, {.n_threads = 1, .n_ctx = 128, .block_size = 4});
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(19);
  Request a = Greedy(RandomPrompt(rng, 30), 6);
  a.cache_salt = "a";
  Request b = a;
  b.cache_salt = "b";
  const Output first = RunOne(*engine, a);
  const std::vector<Output> outs = RunAll(*engine, {b, a});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(first.usage.cached_tokens, 0);
  EXPECT_EQ(outs[0].usage.cached_tokens, 0);
  EXPECT_EQ(outs[1].usage.cached_tokens, 28);  // 7 full blocks of the 30 tokens
  EXPECT_EQ(first.tokens, Expected(a, 128).tokens);
  EXPECT_EQ(outs[0].tokens, first.tokens);
  EXPECT_EQ(outs[1].tokens, first.tokens);
  EXPECT_EQ(engine->Stats().prompt_tokens, 30u + 30u + 2u);
  ExpectNoBlocksReferenced(*engine);
}

}  // namespace
}  // namespace kvserve
