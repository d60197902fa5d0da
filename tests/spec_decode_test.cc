// Speculative decoding changes no token: every request gives the same tokens, logprobs, text and
// finish with speculation on as with it off, whatever the proposer guesses (always right, always
// wrong, right for a while, prompt lookup), greedy or seeded (temperature, top-k/top-p,
// penalties), with stop strings, under memory pressure (preemption with drafts in flight) and
// with prefix-cache hits, and no block stays referenced. On the fake model of
// support/fake_model.h a rejected draft whose K/V stayed visible, a wrong slot or a stale block
// changes the hash and so the tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/proposer.h"
#include "engine/proposer_draft.h"
#include "engine/proposer_ngram.h"
#include "engine/proposer_replay.h"
#include "engine/sequence_runner.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "server/completion_request.h"
#include "server/completion_response.h"
#include "server/metrics.h"
#include "support/cli.h"
#include "support/fake_model.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/stream_output.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::FakeGreedyNext;
using testing::FakeModel;
using testing::kFakeBos;
using testing::kFakeFirstNormal;
using testing::kFakeNormalTokens;

constexpr auto kEventTimeout = std::chrono::seconds(20);
constexpr int kLayers = 2;

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream) { return testing::CollectStream(stream, kEventTimeout); }

std::vector<Output> RunAll(Engine& engine, const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) return {};
    streams.push_back(*stream);
  }
  std::vector<Output> outputs;
  for (auto& stream : streams) outputs.push_back(Collect(*stream));
  return outputs;
}

// The fake's greedy continuation of `tokens`, n tokens long.
std::vector<int32_t> GreedyContinuation(std::vector<int32_t> tokens, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(FakeGreedyNext(tokens, kLayers));
    tokens.push_back(out.back());
  }
  return out;
}

// Proposes the fake's greedy continuation, spoiled from position `wrong_from` on (a token that
// is never the greedy one); wrong_from = 0: always wrong, >= max: always right for greedy.
class RuleProposer final : public Proposer {
 public:
  explicit RuleProposer(int wrong_from) : wrong_from_(wrong_from) {}
  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override {
    for (size_t i = 0; i < seqs.size(); ++i) {
      std::vector<int32_t> draft = GreedyContinuation(seqs[i]->tokens, max_tokens[i]);
      for (size_t j = static_cast<size_t>(wrong_from_); j < draft.size(); ++j) {
        draft[j] = kFakeFirstNormal + (draft[j] - kFakeFirstNormal + 1) % kFakeNormalTokens;
      }
      seqs[i]->draft = std::move(draft);
    }
    ++calls_;
  }
  void Forget(const Sequence& seq) override {
    (void)seq;
    ++forgotten_;
  }
  int calls() const { return calls_; }
  int forgotten() const { return forgotten_; }

 private:
  int wrong_from_;
  int calls_ = 0;
  int forgotten_ = 0;
};

std::vector<int32_t> RandomPrompt(std::mt19937_64& rng, int length) {
  std::vector<int32_t> prompt = {kFakeBos};
  for (int i = 1; i < length; ++i) {
    prompt.push_back(kFakeFirstNormal + static_cast<int32_t>(rng() % kFakeNormalTokens));
  }
  return prompt;
}

// n requests of 1..40 prompt tokens and 4..40 new ones; every odd one shares its first 12 prompt
// tokens with the one before; a quarter repeat a span of their prompt (prompt lookup finds it).
// Sampled ones mix temperature, top-k, top-p and the three penalties; half stop at EOS.
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
    if (i % 4 == 2 && r.prompt.size() > 8) {
      const std::vector<int32_t> span(r.prompt.begin() + 1, r.prompt.begin() + 8);
      for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), span.begin(), span.end());
    }
    r.max_tokens = 4 + static_cast<int>(rng() % 37);
    r.ignore_eos = !sampled || i % 2 == 0;
    r.logprobs = true;
    r.sampling.temperature = sampled ? 0.6f + 0.1f * static_cast<float>(i % 5) : 0.0f;
    r.sampling.top_k = sampled && i % 3 == 0 ? 20 : 0;
    r.sampling.top_p = sampled && i % 3 == 1 ? 0.9f : 1.0f;
    r.sampling.top_logprobs = i % 4 == 1 ? 3 : 0;
    if (sampled && i % 4 == 3) {
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.presence_penalty = 0.4f;
      r.sampling.frequency_penalty = 0.2f;
    }
    r.sampling.seed = 1000 + i;
    requests.push_back(r);
  }
  return requests;
}

class SpecDecode : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& options) {
    auto engine = Engine::Create(*model_, *tokenizer_, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }
  static EngineOptions Options() {
    return EngineOptions{.n_threads = 1,
                         .n_ctx = 160,
                         .block_size = 4,
                         .max_num_seqs = 16,
                         .max_batched_tokens = 64};
  }
  static EngineOptions WithSpec(EngineOptions o, std::shared_ptr<Proposer> proposer,
                                int max_tokens = 5) {
    o.spec.proposer = std::move(proposer);
    o.spec.max_tokens = max_tokens;
    o.spec.batch_tokens = 1 << 16;  // no back-off: 16 sequences all draft
    // Every proposed draft is verified: these tests are of verification, which the cost gate
    // would starve of wrong drafts (tests/spec_gate_test.cc tests the gate; the n-gram and
    // stories tests below run with it on).
    o.spec.cost_gate = false;
    return o;
  }
  // Gives every third request a stop string taken from the middle of its plain output, so the
  // stop lands inside a verified run of drafts.
  void AddStopStrings(std::vector<Request>& requests, const std::vector<Output>& plain) {
    for (size_t i = 0; i < requests.size(); i += 3) {
      const std::string& text = plain[i].text;
      if (text.size() >= 6) requests[i].stop = {text.substr(text.size() / 2, 2)};
    }
  }

 public:
  static void WaitIdle(const Engine& engine) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      const EngineStats s = engine.Stats();
      if (s.running == 0 && s.waiting == 0 && s.blocks_used == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  static void ExpectNoBlocksReferenced(const Engine& engine) {
    WaitIdle(engine);
    const EngineStats stats = engine.Stats();
    EXPECT_EQ(stats.blocks_used, 0);
    EXPECT_EQ(stats.blocks_used + stats.blocks_cached + stats.blocks_free, stats.blocks_total);
  }
  static void ExpectSame(const std::vector<Output>& spec, const std::vector<Output>& plain) {
    ASSERT_EQ(spec.size(), plain.size());
    for (size_t i = 0; i < spec.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(spec[i].logprobs, plain[i].logprobs) << "request " << i;
      ASSERT_EQ(spec[i].top.size(), plain[i].top.size()) << "request " << i;
      for (size_t t = 0; t < spec[i].top.size(); ++t) {
        ASSERT_EQ(spec[i].top[t].size(), plain[i].top[t].size());
        for (size_t a = 0; a < spec[i].top[t].size(); ++a) {
          EXPECT_EQ(spec[i].top[t][a].token, plain[i].top[t][a].token);
          EXPECT_EQ(spec[i].top[t][a].logprob, plain[i].top[t][a].logprob);
        }
      }
      EXPECT_EQ(spec[i].text, plain[i].text) << "request " << i;
      EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
      EXPECT_EQ(spec[i].usage.completion_tokens, plain[i].usage.completion_tokens);
      EXPECT_EQ(spec[i].usage.prompt_tokens, plain[i].usage.prompt_tokens);
      EXPECT_EQ(plain[i].usage.drafted_tokens, 0);
      EXPECT_LE(spec[i].usage.accepted_tokens, spec[i].usage.drafted_tokens);
    }
  }

 protected:
  // Runs `requests` with speculation off, adds stop strings from that output (unless told not
  // to), runs both ways again, checks them equal and returns the speculative engine's stats.
  EngineStats RunBothWays(std::vector<Request> requests, const EngineOptions& plain_options,
                          const EngineOptions& spec_options, bool stop_strings = true) {
    std::vector<Output> plain;
    {
      auto engine = MakeEngine(plain_options);
      if (!engine) return {};
      if (stop_strings) {
        AddStopStrings(requests, RunAll(*engine, requests));
        WaitIdle(*engine);  // ids are reused: the first pass must be gone
      }
      plain = RunAll(*engine, requests);
      ExpectNoBlocksReferenced(*engine);
    }
    auto engine = MakeEngine(spec_options);
    if (!engine) return {};
    const std::vector<Output> spec = RunAll(*engine, requests);
    ExpectSame(spec, plain);
    ExpectNoBlocksReferenced(*engine);
    const EngineStats stats = engine->Stats();
    uint64_t drafted = 0, accepted = 0;
    for (const Output& o : spec) {
      drafted += o.usage.drafted_tokens;
      accepted += o.usage.accepted_tokens;
    }
    EXPECT_EQ(drafted, stats.spec_draft_tokens);
    EXPECT_EQ(accepted, stats.spec_accepted_tokens);
    uint64_t by_position = 0;
    for (uint64_t n : stats.spec_accepted_by_position) by_position += n;
    EXPECT_EQ(by_position, stats.spec_accepted_tokens);
    return stats;
  }

  std::unique_ptr<FakeModel> model_ = FakeModel::Create(TestBackend());
  std::unique_ptr<Tokenizer> tokenizer_ = testing::FakeTokenizer();
};

TEST_F(SpecDecode, AlwaysRightProposerIsFullyAcceptedAndChangesNothing) {
  auto proposer = std::make_shared<RuleProposer>(1 << 20);
  // Without stop strings (a stop inside a run of drafts ends the request before the rest).
  const EngineStats stats =
      RunBothWays(RandomRequests(16, 21, false), Options(), WithSpec(Options(), proposer), false);
  EXPECT_GT(stats.spec_draft_tokens, 100u);
  // Greedy requests follow the rule: every draft is accepted.
  EXPECT_EQ(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  // Far fewer steps than tokens: several tokens per step.
  EXPECT_LT(stats.steps * 2, stats.generation_tokens);
  EXPECT_GT(proposer->calls(), 0);
  EXPECT_EQ(proposer->forgotten(), 16);  // every finished sequence
}

TEST_F(SpecDecode, AlwaysWrongProposerIsNeverAcceptedAndChangesNothing) {
  auto proposer = std::make_shared<RuleProposer>(0);
  const EngineStats stats =
      RunBothWays(RandomRequests(16, 22, false), Options(), WithSpec(Options(), proposer));
  EXPECT_GT(stats.spec_draft_tokens, 100u);
  EXPECT_EQ(stats.spec_accepted_tokens, 0u);
}

TEST_F(SpecDecode, PartlyRightProposerRollsBackTheRestGreedy) {
  auto proposer = std::make_shared<RuleProposer>(2);
  const EngineStats stats =
      RunBothWays(RandomRequests(16, 23, false), Options(), WithSpec(Options(), proposer, 6));
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
  EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  // Nothing past the second position is ever accepted.
  ASSERT_GE(stats.spec_accepted_by_position.size(), 2u);
  for (size_t j = 2; j < stats.spec_accepted_by_position.size(); ++j) {
    EXPECT_EQ(stats.spec_accepted_by_position[j], 0u) << "position " << j;
  }
}

TEST_F(SpecDecode, SeededSamplingWithPenaltiesIsUnchanged) {
  for (int wrong_from : {1 << 20, 3}) {
    auto proposer = std::make_shared<RuleProposer>(wrong_from);
    const EngineStats stats =
        RunBothWays(RandomRequests(16, 24, true), Options(), WithSpec(Options(), proposer));
    EXPECT_GT(stats.spec_draft_tokens, 50u) << wrong_from;
    EXPECT_GT(stats.spec_accepted_tokens, 0u) << wrong_from;  // the likeliest token often wins
  }
}

TEST_F(SpecDecode, NgramProposerChangesNothing) {
  EngineOptions spec = Options();
  spec.spec.method = SpecMethod::kNgram;
  spec.spec.batch_tokens = 1 << 16;
  for (bool sampled : {false, true}) {
    const EngineStats stats = RunBothWays(RandomRequests(16, 25, sampled), Options(), spec);
    EXPECT_GT(stats.spec_draft_tokens, 0u) << sampled;
  }
}

// A pool of 40 blocks of 4 tokens for 16 requests of up to 80 tokens: sequences are preempted
// while drafts are in flight and recomputed from whatever prefix is still cached.
TEST_F(SpecDecode, UnderMemoryPressureAndPrefixHits) {
  EngineOptions plain = Options();
  plain.kv_memory_bytes = 40 * KvCache::BytesPerBlock(model_->kv_spec(), plain.kv_type, 4);
  for (bool sampled : {false, true}) {
    auto proposer = std::make_shared<RuleProposer>(3);
    const EngineStats stats =
        RunBothWays(RandomRequests(16, 26, sampled), plain, WithSpec(plain, proposer));
    EXPECT_GT(stats.preemptions, 0u) << sampled;
    EXPECT_GT(stats.prefix_hits_tokens, 0u) << sampled;
    EXPECT_GT(stats.spec_accepted_tokens, 0u) << sampled;
  }
}

// The same requests twice on one engine: the second pass finds the first's verified blocks in
// the prefix cache (prompt and output), and rejected drafts never entered it.
TEST_F(SpecDecode, SecondPassHitsVerifiedBlocksOnly) {
  auto proposer = std::make_shared<RuleProposer>(2);
  auto engine = MakeEngine(WithSpec(Options(), proposer));
  ASSERT_NE(engine, nullptr);
  std::vector<Request> requests = RandomRequests(16, 27, false);
  const std::vector<Output> first = RunAll(*engine, requests);
  WaitIdle(*engine);
  for (size_t i = 0; i < requests.size(); ++i) {
    // Prompt + first output as the new prompt: its blocks were all computed (and verified).
    requests[i].prompt.insert(requests[i].prompt.end(), first[i].tokens.begin(),
                              first[i].tokens.end());
    requests[i].max_tokens = 8;
  }
  auto plain_engine = MakeEngine(Options());
  ASSERT_NE(plain_engine, nullptr);
  const std::vector<Output> plain = RunAll(*plain_engine, requests);
  const std::vector<Output> second = RunAll(*engine, requests);
  ExpectSame(second, plain);
  int cached = 0;
  for (const Output& o : second) cached += o.usage.cached_tokens;
  EXPECT_GT(cached, 16 * 8);
  ExpectNoBlocksReferenced(*engine);
}

TEST_F(SpecDecode, PerRequestSwitchAndBackOff) {
  auto proposer = std::make_shared<RuleProposer>(1 << 20);
  {
    // `speculative` off: nothing drafted for that request.
    auto engine = MakeEngine(WithSpec(Options(), proposer));
    ASSERT_NE(engine, nullptr);
    std::vector<Request> requests = RandomRequests(2, 28, false);
    requests[0].speculative = false;
    requests[0].max_tokens = requests[1].max_tokens = 20;
    const std::vector<Output> out = RunAll(*engine, requests);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].usage.drafted_tokens, 0);
    EXPECT_GT(out[1].usage.drafted_tokens, 0);
    EXPECT_EQ(out[1].usage.accepted_tokens, out[1].usage.drafted_tokens);
  }
  {
    // The default back-off (16 decode + draft tokens a step): 16 decoding sequences draft nothing.
    // Stepped by hand so that all 16 are admitted in the same step (through Engine, the first
    // ones could start decoding, and drafting, before the last were submitted).
    EngineOptions o = WithSpec(Options(), proposer);
    o.spec.batch_tokens = 16;
    const int n_blocks = o.max_num_seqs * (o.n_ctx / o.block_size);
    EngineCore core(*model_, *tokenizer_, o, {n_blocks}, 0, nullptr);
    std::vector<Request> requests = RandomRequests(16, 29, false);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (Request& r : requests) {
      r.prompt.resize(4);
      r.max_tokens = 30;
      streams.push_back(std::make_shared<RequestStream>());
      core.Add(r, streams.back());
    }
    while (core.Step()) {
    }
    int drafted = 0;
    for (auto& stream : streams) drafted += Collect(*stream).usage.drafted_tokens;
    EXPECT_EQ(drafted, 0);
    // The same 16 with the back-off widened do draft: the 0 above is the back-off's doing.
    o.spec.batch_tokens = 1 << 16;
    EngineCore wide(*model_, *tokenizer_, o, {n_blocks}, 0, nullptr);
    streams.clear();
    for (const Request& r : requests) {
      streams.push_back(std::make_shared<RequestStream>());
      wide.Add(r, streams.back());
    }
    while (wide.Step()) {
    }
    drafted = 0;
    for (auto& stream : streams) drafted += Collect(*stream).usage.drafted_tokens;
    EXPECT_GT(drafted, 0);
  }
}

TEST_F(SpecDecode, SpecOptionsAreChecked) {
  EngineOptions o = Options();
  o.spec.method = SpecMethod::kNgram;
  o.spec.max_tokens = 0;
  auto engine = Engine::Create(*model_, *tokenizer_, o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("spec max tokens 0"), std::string::npos) << engine.message();
  o.spec.max_tokens = 4;
  o.spec.ngram_min = 3;
  o.spec.ngram_max = 2;
  engine = Engine::Create(*model_, *tokenizer_, o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("spec ngram max 2"), std::string::npos) << engine.message();
  o.spec = SpecOptions{.method = SpecMethod::kDraft};
  engine = Engine::Create(*model_, *tokenizer_, o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("draft model"), std::string::npos) << engine.message();
}

// stories260K, a real model: speculation with prompt lookup and with the model drafting for
// itself gives the same tokens and logprobs as plain decoding for 16 concurrent requests, and the
// self-draft is accepted every time under greedy decoding.
class SpecDecodeStories : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadOrDie("stories260K.gguf");
    ASSERT_NE(model_, nullptr);
    auto tokenizer = Tokenizer::FromGguf(model_->file());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    tokenizer_ = std::move(tokenizer).value();
  }
  std::vector<Request> Requests(bool sampled) const {
    const char* texts[] = {"Once upon a time, there was a little girl named Lily. She",
                           "The cat sat on the mat. The cat sat on the",
                           "Tom and Sam went to the park. Tom and Sam", "One day, a big dog"};
    std::vector<Request> out;
    for (int i = 0; i < 16; ++i) {
      Request r;
      r.id = "s" + std::to_string(i);
      r.prompt = tokenizer_->Encode(texts[i % 4], true, false);
      r.max_tokens = 24 + 3 * i;
      r.logprobs = true;
      r.sampling.temperature = sampled ? 0.8f : 0.0f;
      r.sampling.top_p = sampled && i % 2 ? 0.9f : 1.0f;
      r.sampling.repetition_penalty = sampled && i % 3 == 0 ? 1.2f : 1.0f;
      r.sampling.seed = 77 + i;
      if (i % 5 == 4) r.stop = {"."};
      out.push_back(r);
    }
    return out;
  }
  std::vector<Output> Run(const EngineOptions& options, const std::vector<Request>& requests,
                          EngineStats* stats) {
    auto engine = Engine::Create(*model_, *tokenizer_, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    if (!engine.ok()) return {};
    std::vector<Output> out = RunAll(**engine, requests);
    SpecDecode::ExpectNoBlocksReferenced(**engine);
    if (stats) *stats = (*engine)->Stats();
    return out;
  }
  static EngineOptions Options() {
    return EngineOptions{.n_threads = 2,
                         .n_ctx = 256,
                         .block_size = 16,
                         .max_num_seqs = 16,
                         .max_batched_tokens = 256};
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// The draft model's own pool: its blocks are all given back when the requests end, also when
// the pool is too small for every sequence (drafts then skip sequences, outputs unchanged).
TEST_F(SpecDecodeStories, DraftPoolLeaksNoBlock) {
  const std::vector<Request> requests = Requests(true);
  const std::vector<Output> plain = Run(Options(), requests, nullptr);
  for (int n_blocks : {256, 12}) {
    auto proposer = std::make_shared<DraftProposer>(*model_, KvType::kF32, 16, n_blocks, 1);
    EngineOptions o = Options();
    o.spec.proposer = proposer;
    o.spec.batch_tokens = 1 << 16;
    EngineStats stats;
    SpecDecode::ExpectSame(Run(o, requests, &stats), plain);
    EXPECT_GT(stats.spec_draft_tokens, 0u) << n_blocks;
    EXPECT_GT(proposer->forwards(), 0);
    EXPECT_EQ(proposer->blocks_used(), 0) << n_blocks;
  }
}

// Batch invariance, which the whole guarantee rests on: the logits of k tokens verified in one
// forward equal, bit for bit, those of k single decode steps.
TEST_F(SpecDecodeStories, VerifyRowsEqualSingleStepsBitForBit) {
  const std::vector<int32_t> prompt =
      tokenizer_->Encode("Once upon a time, there was", true, false);
  const std::vector<int32_t> next = {300, 17, 99, 250, 4, 123, 8};
  const int n_vocab = model_->config().n_vocab;
  SequenceRunner batched(*model_, KvType::kF32, 128, 2);
  SequenceRunner single(*model_, KvType::kF32, 128, 1);
  ASSERT_TRUE(batched.Append(prompt).ok());
  ASSERT_TRUE(single.Append(prompt).ok());
  auto rows = batched.Append(next, /*all_logits=*/true);
  ASSERT_TRUE(rows.ok()) << rows.message();
  const std::vector<float> all(rows->begin(), rows->end());
  ASSERT_EQ(all.size(), next.size() * n_vocab);
  for (size_t i = 0; i < next.size(); ++i) {
    auto row = single.Append(std::span<const int32_t>(&next[i], 1));
    ASSERT_TRUE(row.ok()) << row.message();
    EXPECT_EQ(std::memcmp(row->data(), all.data() + i * n_vocab, n_vocab * sizeof(float)), 0)
        << "row " << i;
  }
}

TEST_F(SpecDecodeStories, NgramAndSelfDraftChangeNothing) {
  for (bool sampled : {false, true}) {
    const std::vector<Request> requests = Requests(sampled);
    const std::vector<Output> plain = Run(Options(), requests, nullptr);
    EngineOptions ngram = Options();
    ngram.spec.method = SpecMethod::kNgram;
    ngram.spec.batch_tokens = 1 << 16;
    EngineStats ngram_stats;
    SpecDecode::ExpectSame(Run(ngram, requests, &ngram_stats), plain);
    EXPECT_GT(ngram_stats.spec_accepted_tokens, 0u) << sampled;

    EngineOptions draft = Options();
    draft.spec.method = SpecMethod::kDraft;
    draft.spec.draft_model = model_.get();
    draft.spec.batch_tokens = 1 << 16;
    // Every draft verified: the cost gate's cut depends on this machine's measured step times
    // (under a sanitizer it once left 99 drafted tokens), and the count below is about drafting.
    draft.spec.cost_gate = false;
    EngineStats draft_stats;
    const std::vector<Output> drafted = Run(draft, requests, &draft_stats);
    SpecDecode::ExpectSame(drafted, plain);
    EXPECT_GT(draft_stats.spec_draft_tokens, 100u) << sampled;
    for (size_t i = 0; i < drafted.size() && !sampled; ++i) {
      // Greedy self-drafts are all accepted (but a stop string ends a run of them early).
      if (!requests[i].stop.empty()) continue;
      EXPECT_GT(drafted[i].usage.drafted_tokens, 0) << i;
      EXPECT_EQ(drafted[i].usage.accepted_tokens, drafted[i].usage.drafted_tokens) << i;
    }

    // The draft's own pool under pressure: a shared budget so small that drafts often lack room.
    draft.kv_memory_bytes =
        40 * KvCache::BytesPerBlock(model_->kv_spec(), draft.kv_type, draft.block_size);
    SpecDecode::ExpectSame(Run(draft, requests, &draft_stats), plain);
    EXPECT_GT(draft_stats.preemptions, 0u) << sampled;
  }
}

// The server's side: the `speculative` request field, the usage figures, the Prometheus counters.
TEST(SpecServerFields, RequestUsageAndMetrics) {
  CompletionRequest r;
  EXPECT_FALSE(ParseCompletionRequest({{"prompt", "a"}}, CompletionKind::kText, 64, r));
  EXPECT_TRUE(r.speculative);
  EXPECT_FALSE(ParseCompletionRequest({{"prompt", "a"}, {"speculative", false}},
                                      CompletionKind::kText, 64, r));
  EXPECT_FALSE(r.speculative);
  auto error =
      ParseCompletionRequest({{"prompt", "a"}, {"speculative", 3}}, CompletionKind::kText, 64, r);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("speculative"), std::string::npos) << error->message;

  const nlohmann::json plain = ResponseShaper::UsageJson(UsageTotals{.prompt_tokens = 3});
  EXPECT_FALSE(plain.contains("drafted_tokens"));
  const nlohmann::json spec = ResponseShaper::UsageJson(
      UsageTotals{.prompt_tokens = 3, .drafted_tokens = 10, .accepted_tokens = 7});
  EXPECT_EQ(spec["drafted_tokens"], 10);
  EXPECT_EQ(spec["accepted_tokens"], 7);

  EngineStats stats;
  stats.spec_drafts = 4;
  stats.spec_draft_tokens = 10;
  stats.spec_accepted_tokens = 7;
  stats.spec_accepted_by_position = {4, 3};
  const std::string text = ServerMetrics().Render(stats);
  EXPECT_NE(text.find("kvserve:spec_decode_num_drafts_total 4"), std::string::npos) << text;
  EXPECT_NE(text.find("kvserve:spec_decode_num_draft_tokens_total 10"), std::string::npos);
  EXPECT_NE(text.find("kvserve:spec_decode_num_accepted_tokens_total 7"), std::string::npos);
  EXPECT_NE(text.find("kvserve:spec_decode_num_accepted_tokens_per_pos{position=\"1\"} 3"),
            std::string::npos);
}

// `kvserve run --spec`: the same tokens as without, and the acceptance rate on stderr.
TEST(SpecRunCommand, SameTokensAndAcceptanceOnStderr) {
  const std::string stories = testing::ModelPath("stories260K.gguf");
  const std::string base = "run -m " + stories +
                           " -p 'Once upon a time' -n 48 --temp 0.8 --seed 5 -t 1 "
                           "--output-format json";
  std::string plain, spec, err;
  ASSERT_EQ(testing::RunKvserve(base, &plain, &err), 0) << err;
  ASSERT_EQ(testing::RunKvserve(base + " --spec draft --model-draft " + stories, &spec, &err), 0)
      << err;
  const auto a = nlohmann::json::parse(plain);
  const auto b = nlohmann::json::parse(spec);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_FALSE(a.contains("drafted_tokens"));  // only with --spec
  EXPECT_GT(b["drafted_tokens"].get<int>(), 0);
  std::string out;
  ASSERT_EQ(testing::RunKvserve("run -m " + stories +
                                    " -p 'Once upon a time' -n 40 --temp 0 -t 1 --spec draft "
                                    "--model-draft " +
                                    stories,
                                &out, &err),
            0);
  EXPECT_NE(err.find("drafted tokens accepted (100.0%)"), std::string::npos) << err;
  EXPECT_NE(testing::RunKvserve("run -m " + stories + " -p x --spec draft", &out, &err), 0);
  EXPECT_NE(err.find("--spec draft needs --model-draft"), std::string::npos) << err;
}

// `kvserve bench --spec`: plain and speculative rows, the same output checked in each (greedy, and
// seeded sampling with --spec-sampling both).
TEST(SpecBenchCommand, RowsWithTheSameOutput) {
  const std::string stories = testing::ModelPath("stories260K.gguf");
  for (const std::string& method :
       {std::string("--spec ngram --spec-sampling both"), "--spec draft --model-draft " + stories,
        std::string("--spec-replay 0,1,repeats")}) {
    std::string out, err;
    ASSERT_EQ(testing::RunKvserve("bench -m " + stories + " " + method +
                                      " -n 24 -r 1 -t 1 --spec-streams 1,4 -o json",
                                  &out, &err),
              0)
        << method << ": " << err;
    const auto rows = nlohmann::json::parse(out);
    const size_t variants = method.find("replay") != std::string::npos ? 3 : 1;
    const size_t samplings = method.find("both") != std::string::npos ? 2 : 1;
    ASSERT_EQ(rows.size(), 2 * 2 * variants * samplings) << out;  // 2 tasks x 2 stream counts
    int seeded = 0, ceiling_drafted = 0, grounded_repeats = 0;
    for (const auto& row : rows) {
      EXPECT_TRUE(row["same_output"].get<bool>()) << row.dump();
      seeded += row["sampling"] == "seeded";
      if (row["method"] == "replay@1.00" || row["method"] == "draft") {
        EXPECT_EQ(row["accepted_tokens"], row["drafted_tokens"]) << row.dump();
        EXPECT_GT(row["drafted_tokens"].get<int>(), 0) << row.dump();
      }
      if (row["method"] == "replay@0.00") {
        EXPECT_EQ(row["accepted_tokens"], 0) << row.dump();
      }
      // The repeat ceiling drafts only tokens that repeat earlier text, always right.
      EXPECT_LE(row["repeated_tokens"].get<int>(), row["generated_tokens"].get<int>());
      if (row["method"] == "replay@repeats") {
        EXPECT_EQ(row["accepted_tokens"], row["drafted_tokens"]) << row.dump();
        EXPECT_LE(row["accepted_tokens"].get<int>(), row["repeated_tokens"].get<int>());
        ceiling_drafted += row["drafted_tokens"].get<int>();
      }
      if (row["task"] == "grounded") grounded_repeats += row["repeated_tokens"].get<int>();
    }
    if (method.find("replay") != std::string::npos) {
      EXPECT_GT(ceiling_drafted, 0) << out;
    }
    EXPECT_GT(grounded_repeats, 0) << out;
    EXPECT_EQ(seeded, samplings == 2 ? 4 : 0) << out;
  }
  std::string out, err;
  EXPECT_EQ(
      testing::RunKvserve("bench -m " + stories + " --spec ngram --spec-sampling hot", &out, &err),
      2);
  EXPECT_NE(err.find("--spec-sampling: 'hot' is not one of greedy, seeded, both"),
            std::string::npos)
      << err;
}

// `kvserve run --batch-file` with a draft model: the same lines (tokens, text, finish) as without,
// plus the drafted and accepted counts.
TEST(SpecRunCommand, BatchFileWithADraftModel) {
  const std::string stories = testing::ModelPath("stories260K.gguf");
  const std::string file = testing::TempDir() + "/spec-requests.jsonl";
  {
    std::ofstream out(file);
    for (int i = 0; i < 8; ++i) {
      nlohmann::json r = {{"id", "r" + std::to_string(i)},
                          {"prompt", i % 2 ? "Once upon a time" : "The dog"},
                          {"max_tokens", 20 + 3 * i}};
      if (i % 3)
        r.update({{"temperature", 0.9}, {"seed", 10 + i}});
      else
        r["temperature"] = 0;
      out << r.dump() << "\n";
    }
  }
  const std::string base = "run -m " + stories + " -t 1 --batch-file " + file;
  std::string plain, spec, err;
  ASSERT_EQ(testing::RunKvserve(base, &plain, &err), 0) << err;
  ASSERT_EQ(testing::RunKvserve(base + " --spec draft --model-draft " + stories, &spec, &err), 0)
      << err;
  std::istringstream a(plain), b(spec);
  std::string la, lb;
  int lines = 0, drafted = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    const auto ja = nlohmann::json::parse(la), jb = nlohmann::json::parse(lb);
    for (const char* key : {"id", "tokens", "text", "finish_reason"}) {
      EXPECT_EQ(ja[key], jb[key]) << key << " of " << ja["id"];
    }
    EXPECT_FALSE(ja.contains("drafted_tokens"));
    drafted += jb["drafted_tokens"].get<int>();
    ++lines;
  }
  EXPECT_EQ(lines, 8);
  EXPECT_GT(drafted, 0);
}

// How many of `output`'s tokens RepeatedPositions marks after `prompt`.
int RepeatedCount(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                  int span) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  const std::vector<bool> marks = RepeatedPositions(all, prompt.size(), span);
  EXPECT_TRUE(std::none_of(marks.begin(), marks.begin() + prompt.size(), [](bool m) { return m; }));
  return static_cast<int>(std::count(marks.begin(), marks.end(), true));
}

TEST(RepeatedPositions, MarkTheTokensEndingARunSeenEarlier) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  // 3-token spans ending at each output token, looked up in everything before them.
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{1, 2, 3, 4}, 3), 2);     // 1,2,3 and 2,3,4
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{9, 3, 4, 5, 6}, 3), 2);  // 3,4,5 and 4,5,6
  // A span made of prompt and output tokens: 5,6 | 1 never occurred; 6,1,2 neither.
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{1, 2}, 3), 0);
  // The output's own earlier tokens count: the second 7,8,9 (8,9,7 and 9,7,8 are new).
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{7, 8, 9, 7, 8, 9}, 3), 1);
  // Span 2 over nothing that repeats, and an empty output.
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{10, 11, 12}, 2), 0);
  EXPECT_EQ(RepeatedCount(prompt, std::vector<int32_t>{}, 4), 0);
  // A span longer than everything: nothing.
  EXPECT_EQ(RepeatedCount(std::vector<int32_t>{}, std::vector<int32_t>{5, 5}, 4), 0);
  EXPECT_EQ(RepeatedCount(std::vector<int32_t>{}, std::vector<int32_t>{5, 5, 5}, 2), 1);
}

TEST(NgramLookup, ProposesWhatFollowedTheMostRecentMatch) {
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 6, 7};
  // "6 7" last occurred at 5..6, followed by 1 2 6 7.
  EXPECT_EQ(NgramProposer::Lookup(tokens, 1, 3, 3), (std::vector<int32_t>{1, 2, 6}));
  // The longest suffix first: "2 6 7" never recurs, "6 7" does.
  EXPECT_EQ(NgramProposer::Lookup(tokens, 2, 3, 10), (std::vector<int32_t>{1, 2, 6, 7}));
  EXPECT_TRUE(NgramProposer::Lookup(tokens, 3, 3, 4).empty());
  EXPECT_TRUE(NgramProposer::Lookup(std::vector<int32_t>{4}, 1, 3, 4).empty());
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{4, 4}, 1, 3, 4), (std::vector<int32_t>{4}));
}

TEST(SpecDepth, GrowsOnFullAcceptanceAndDropsPastTheFirstRejection) {
  EXPECT_EQ(NextSpecDepth(3, 3, 3, 1, 5), 4);
  EXPECT_EQ(NextSpecDepth(5, 5, 5, 1, 5), 5);
  EXPECT_EQ(NextSpecDepth(5, 5, 1, 1, 5), 2);
  EXPECT_EQ(NextSpecDepth(5, 5, 0, 2, 5), 2);
}

TEST(BlockManagerTruncate, ReleasesTheBlocksPastTheKeptTokens) {
  BlockManager m(8, 4, true);
  BlockTable t;
  ASSERT_TRUE(m.Grow(t, 13));  // 4 blocks
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  m.Commit(t, tokens, 8, "");
  EXPECT_EQ(t.keys.size(), 2u);
  m.Truncate(t, 9);
  EXPECT_EQ(t.n_logical(), 3);
  EXPECT_EQ(t.keys.size(), 2u);
  EXPECT_EQ(m.Stats().free, 5);
  m.Truncate(t, 5);
  EXPECT_EQ(t.n_logical(), 2);
  EXPECT_EQ(t.keys.size(), 2u);
  m.Truncate(t, 4);  // the second, keyed block goes to the cache, not the free list
  EXPECT_EQ(t.n_logical(), 1);
  EXPECT_EQ(t.keys.size(), 1u);
  EXPECT_EQ(m.Stats().cached, 1);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
  m.Free(t);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
}

// Drafts grow tables without evicting: only free blocks count then.
TEST(BlockManagerTruncate, GrowWithoutEvictionTakesOnlyFreeBlocks) {
  BlockManager m(3, 2, true);
  BlockTable cached;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  ASSERT_TRUE(m.Grow(cached, 5));
  m.Commit(cached, tokens, 4, "");
  m.Free(cached);  // two keyed blocks cached, one free
  EXPECT_EQ(m.Stats().cached, 2);
  BlockTable t;
  EXPECT_FALSE(m.Grow(t, 4, /*evict=*/false));
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(m.Grow(t, 2, /*evict=*/false));
  EXPECT_EQ(m.Stats().cached, 2);
  EXPECT_TRUE(m.Grow(t, 4));  // evicting is allowed by default
  EXPECT_EQ(m.Stats().cached, 1);
  m.Free(t);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
}

}  // namespace
}  // namespace kvserve
