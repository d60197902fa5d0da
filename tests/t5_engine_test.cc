// T5 through the engine (EngineCore stepped by hand): the prompt goes to the encoder, which runs
// once at admission into the sequence's cross-attention blocks (kv/cross_attention_kind.h), and
// the decoder starts from the model's start token. Checked: greedy decoding equals the model run
// by hand (support/t5_run.h); a second request with the same input finds its encoding in the
// prefix cache (reported as cached tokens) and gives the same bits, another tenant's does not;
// 16 sampled requests sharing 4 inputs, in a pool small enough to preempt, give each one's answer
// alone; no block is left held; n-gram drafts (from the decoder's output and the encoder's input)
// verified as usual give the same tokens; what an encoder-decoder cannot do is refused by name.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/proposer_ngram.h"
#include "model/model.h"
#include "support/core_run.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/t5_run.h"
#include "support/unfreed_run.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using Output = testing::StreamOutput;

using Loaded = testing::LoadedModel;

Loaded LoadTiny(const std::string& preset) { return testing::LoadSynthesizedF32(preset); }

EngineOptions Options(bool prefix_caching, int max_batched_tokens = 64) {
  return EngineOptions{.n_threads = 2,
                       .n_ctx = 128,
                       .block_size = 4,
                       .max_num_seqs = 16,
                       .max_batched_tokens = max_batched_tokens,
                       .prefix_caching = prefix_caching};
}

// Blocks of the decoder's self-attention pool and of the cross-attention pool.
std::vector<int> Pools(int self, int cross) { return {self, cross}; }

Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.logprobs = true;
  r.sampling.temperature = 0.0f;
  return r;
}

void ExpectNothingHeld(EngineCore& core) {
  EngineStats stats;
  core.FillStats(stats);
  for (size_t g = 0; g < stats.group_blocks_used.size(); ++g) {
    EXPECT_EQ(stats.group_blocks_used[g], 0) << "group " << g;
  }
}

class T5Engine : public ::testing::TestWithParam<std::string> {};

TEST_P(T5Engine, GreedyEqualsTheModelRunByHand) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const std::vector<int32_t> input = {307, 83, 450, 262, 119, 498, 37, 221, 376, 145, 290, 2};
  testing::T5Run by_hand(*l.model, 1);
  by_hand.Encode({input});
  const std::vector<int32_t> want = by_hand.Greedy(20);
  for (int batched : {64, 4}) {  // the input in a step of its own when it exceeds the budget
    EngineCore core(*l.model, *l.tokenizer, Options(true, batched), Pools(64, 64), 0, nullptr);
    const Output got = testing::RunCoreChecked(core, {Greedy(input, 20)})[0];
    EXPECT_EQ(got.tokens, want) << "max_batched_tokens " << batched;
    EXPECT_EQ(got.usage.prompt_tokens, static_cast<int>(input.size()));
    EXPECT_EQ(got.usage.cached_tokens, 0);
    ExpectNothingHeld(core);
  }
}

// A decoder prompt is fed after the start token (in the same chunk) before the answer; the input
// stays cached across decoder prompts, and the decoder's own blocks are shared only under the
// same input.
TEST_P(T5Engine, ADecoderPromptIsTheAnswersForcedStart) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const std::vector<int32_t> input = {307, 83, 450, 262, 119, 498, 37, 221, 2};
  const std::vector<int32_t> prefix = {12, 99, 7, 45, 300, 18, 77, 5, 61};
  testing::T5Run by_hand(*l.model, 1);
  by_hand.Encode({input});
  const std::vector<int32_t> want = by_hand.Greedy(12, prefix);
  EngineCore core(*l.model, *l.tokenizer, Options(true), Pools(64, 64), 0, nullptr);
  Request r = Greedy(input, 12);
  r.decoder_prompt = prefix;
  const Output got = testing::RunCoreChecked(core, {r})[0];
  EXPECT_EQ(got.tokens, want);
  EXPECT_EQ(got.usage.prompt_tokens, static_cast<int>(input.size() + prefix.size()));
  // Again: the input and the decoder prompt's two full blocks (of its 10 tokens, the last one
  // always computed) come from the cache.
  const Output again = testing::RunCoreChecked(core, {r})[0];
  EXPECT_EQ(again.tokens, want);
  EXPECT_EQ(again.usage.cached_tokens, static_cast<int>(input.size()) + 8);
  // The same decoder prompt after another input shares nothing.
  Request other = r;
  other.prompt.back() = 3;
  EXPECT_EQ(testing::RunCoreChecked(core, {other})[0].usage.cached_tokens, 0);
  ExpectNothingHeld(core);
}

TEST_P(T5Engine, TheSameInputAgainIsEncodedOnceAndGivesTheSameBits) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  std::mt19937 rng(5);
  const std::vector<int32_t> input = testing::RandomPrompt(rng, 23, l.model->config().n_vocab);
  EngineCore core(*l.model, *l.tokenizer, Options(true), Pools(64, 64), 0, nullptr);
  auto run = [&](const Request& r) { return testing::RunCoreChecked(core, {r})[0]; };
  const Output first = run(testing::Sampled(input, 16, 1));
  EXPECT_EQ(first.usage.cached_tokens, 0);
  const Output again = run(testing::Sampled(input, 16, 1));
  // The whole input (the decoder's prompt is its start token alone, always computed).
  EXPECT_EQ(again.usage.cached_tokens, 23);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.logprobs, first.logprobs);
  Request other_tenant = testing::Sampled(input, 16, 1);
  other_tenant.cache_salt = "tenant b";
  const Output other = run(other_tenant);
  EXPECT_EQ(other.usage.cached_tokens, 0);
  EXPECT_EQ(other.tokens, first.tokens);
  EXPECT_EQ(other.logprobs, first.logprobs);
  // Another input of the same start: nothing of the first input's encoding (or of its decoder
  // blocks, which depend on it) is reused.
  std::vector<int32_t> changed = input;
  changed.back() = changed.back() == 5 ? 6 : 5;
  const Output third = run(testing::Sampled(changed, 16, 1));
  EXPECT_EQ(third.usage.cached_tokens, 0);
  ExpectNothingHeld(core);
}

TEST_P(T5Engine, SixteenSharingFourInputsEqualAloneThroughPreemption) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> inputs;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(testing::RandomPrompt(rng, 9 + 7 * i, l.model->config().n_vocab));
  }
  std::vector<Request> requests;
  for (int i = 0; i < 16; ++i) requests.push_back(testing::Sampled(inputs[i % 4], 24, i));
  std::vector<Output> alone;
  for (const Request& r : requests) {
    EngineCore core(*l.model, *l.tokenizer, Options(false), Pools(64, 64), 0, nullptr);
    alone.push_back(testing::RunCoreChecked(core, {r})[0]);
  }
  for (bool prefix_caching : {false, true}) {
    // 16 decoders of up to 25 tokens need 112 blocks and the inputs up to 30 tokens 8 each: the
    // pools hold far fewer, so sequences are preempted and resumed.
    EngineCore core(*l.model, *l.tokenizer, Options(prefix_caching), Pools(40, 40), 0, nullptr);
    const std::vector<Output> together = testing::RunCoreChecked(core, requests);
    EngineStats stats;
    core.FillStats(stats);
    EXPECT_GT(stats.preemptions, 0u) << "prefix caching " << prefix_caching;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(together[i].logprobs, alone[i].logprobs) << "request " << i;
    }
    ExpectNothingHeld(core);
  }
}

// Drafts with speculation on equal plain decoding's tokens and logprobs, greedy and sampled.
// t5-tiny-v1 repeats its tokens (the tied output), so its drafts are accepted.
TEST_P(T5Engine, NgramDraftsGiveThePlainAnswer) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  std::mt19937 rng(13);
  const std::vector<int32_t> input = testing::RandomPrompt(rng, 17, l.model->config().n_vocab);
  for (bool sampled : {false, true}) {
    const Request r = sampled ? testing::Sampled(input, 32, 3) : Greedy(input, 32);
    EngineCore plain(*l.model, *l.tokenizer, Options(true), Pools(64, 64), 0, nullptr);
    const Output want = testing::RunCoreChecked(plain, {r})[0];
    EngineOptions options = Options(true);
    options.spec.method = SpecMethod::kNgram;
    options.spec.cost_gate = false;
    EngineCore drafting(*l.model, *l.tokenizer, options, Pools(64, 64), 0, nullptr);
    const Output got = testing::RunCoreChecked(drafting, {r})[0];
    EXPECT_EQ(got.tokens, want.tokens) << "sampled " << sampled;
    EXPECT_EQ(got.logprobs, want.logprobs) << "sampled " << sampled;
    if (GetParam() == "t5-tiny-v1" && !sampled) {
      EXPECT_GT(got.usage.accepted_tokens, 0);
    }
    ExpectNothingHeld(drafting);
  }
}

TEST_P(T5Engine, RefusesContextShiftAndDraftModels) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  EngineOptions shift = Options(true);
  shift.context_overflow = ContextOverflow::kShift;
  auto engine = Engine::Create(*l.model, *l.tokenizer, shift);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("encoder-decoder"), std::string::npos) << engine.message();
  for (SpecMethod method : {SpecMethod::kDraft, SpecMethod::kMtp, SpecMethod::kHistory}) {
    EngineOptions options = Options(true);
    options.spec.method = method;
    options.spec.draft_model = l.model.get();
    auto refused = Engine::Create(*l.model, *l.tokenizer, options);
    ASSERT_FALSE(refused.ok()) << SpecMethodName(method);
    EXPECT_NE(refused.message().find("encoder-decoder"), std::string::npos) << refused.message();
  }
  auto plain = Engine::Create(*l.model, *l.tokenizer, Options(true));
  ASSERT_TRUE(plain.ok()) << plain.message();
  Request r = Greedy({5, 6, 7}, 4);
  r.context_overflow = ContextOverflow::kShift;
  auto stream = (*plain)->Submit(r);
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.message().find("encoder-decoder"), std::string::npos) << stream.message();
}

// The context (128 here) bounds the encoder's input and the decoder's tokens each, not their sum.
TEST_P(T5Engine, TheContextBoundsTheInputAndTheAnswerEach) {
  Loaded l = LoadTiny(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  auto engine = Engine::Create(*l.model, *l.tokenizer, Options(true));
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::mt19937 rng(3);
  const int n_vocab = l.model->config().n_vocab;
  auto fits = (*engine)->Submit(Greedy(testing::RandomPrompt(rng, 128, n_vocab), 127));
  ASSERT_TRUE(fits.ok()) << fits.message();
  const Output out = testing::CollectStream(**fits, std::chrono::milliseconds(30000));
  EXPECT_EQ(out.tokens.size(), 127u);
  auto long_input = (*engine)->Submit(Greedy(testing::RandomPrompt(rng, 129, n_vocab), 4));
  ASSERT_FALSE(long_input.ok());
  EXPECT_NE(long_input.message().find("encoder input of 129 tokens"), std::string::npos)
      << long_input.message();
  // With a KV budget whose cross-attention pool cannot hold the input's blocks: refused, not left
  // waiting forever.
  EngineOptions small = Options(true);
  small.kv_memory_bytes = 64 * 1024;
  auto tight = Engine::Create(*l.model, *l.tokenizer, small);
  ASSERT_TRUE(tight.ok()) << tight.message();
  auto no_room = (*tight)->Submit(Greedy(testing::RandomPrompt(rng, 128, n_vocab), 4));
  ASSERT_FALSE(no_room.ok());
  EXPECT_NE(no_room.message().find("cross-attention KV blocks"), std::string::npos)
      << no_room.message();
  Request long_answer = Greedy({5, 6, 7}, 120);
  long_answer.decoder_prompt = testing::RandomPrompt(rng, 8, n_vocab);  // 1 + 8 + 120 > 128
  auto refused = (*engine)->Submit(long_answer);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("decoder prompt of 9 tokens"), std::string::npos)
      << refused.message();
}

// The n-gram lookup drafts from the encoder's input when the output's own tokens do not recur:
// what follows the last occurrence there of the output's last n tokens (longest n first).
TEST(T5Ngram, DraftsFromTheEncoderInput) {
  const std::vector<int32_t> input = {9, 1, 2, 3, 4, 5, 6, 1, 2, 7, 8};
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{0, 1, 2}, 1, 3, 4, input),
            (std::vector<int32_t>{7, 8}));  // the last "1 2" in the input
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{0, 3, 4}, 1, 3, 3, input),
            (std::vector<int32_t>{5, 6, 1}));
  // The output's own earlier tokens come first for the same n.
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{0, 4, 11, 4}, 1, 3, 2, input),
            (std::vector<int32_t>{11, 4}));
  // A longer match in the input beats a shorter one in the output.
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{0, 6, 2, 6, 1, 2}, 1, 3, 2, input),
            (std::vector<int32_t>{7, 8}));
  // The input's last token drafts nothing: a match there must leave a token after it.
  EXPECT_EQ(NgramProposer::Lookup(std::vector<int32_t>{0, 8}, 1, 3, 2, input),
            std::vector<int32_t>{});
}

INSTANTIATE_TEST_SUITE_P(Presets, T5Engine, ::testing::Values("t5-tiny", "t5-tiny-v1"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kvserve
