// Context overflow by shifting (engine/context_shift.h) on stories260K (context 128): generation
// to four times the context keeps the sink tokens and the pinned prefix (their blocks stay in the
// table), every logits row after a shift equals a fresh forward over the kept tokens at their
// positions bit for bit, the penalties still count the dropped tokens, concurrent shifting
// requests (with preemption) give what they give alone and leave no block referenced, the prefix
// cache and speculative decoding change no token across a shift, a prompt longer than the context
// keeps its head and end, and the error policy is unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/context_shift.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/sequence_runner.h"
#include "model/model.h"
#include "support/core_run.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/stream_output.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

constexpr int kCtx = 128;  // stories260K's training context
constexpr int kBlock = 16;

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

const Loaded& Stories() {
  static const Loaded* loaded = [] {
    auto* l = new Loaded;
    auto model = LoadModel(testing::ModelPath("stories260K.gguf"), TestBackend());
    EXPECT_TRUE(model.ok()) << model.message();
    if (!model.ok()) return l;
    l->model = std::move(model).value();
    auto tokenizer = Tokenizer::FromGguf(l->model->file());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
    if (tokenizer.ok()) l->tokenizer = std::move(tokenizer).value();
    return l;
  }();
  return *loaded;
}

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream, std::chrono::milliseconds wait) {
  return testing::CollectStream(stream, wait);
}

void ExpectSame(const Output& a, const Output& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.finish_reason, b.finish_reason) << what;
  EXPECT_EQ(a.usage.dropped_tokens, b.usage.dropped_tokens) << what;
  EXPECT_EQ(a.usage.context_shifts, b.usage.context_shifts) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * 4)) << what;
}

EngineOptions CoreOptions() {
  return EngineOptions{.n_threads = 1,
                       .n_ctx = kCtx,
                       .block_size = kBlock,
                       .max_num_seqs = 8,
                       .max_batched_tokens = 512,
                       .sink_tokens = 4};
}

// The engine's core driven step by step (so the tests can look at its sequences and pool).
struct Core {
  Core(const EngineOptions& options, int n_blocks, const Loaded& loaded = Stories())
      : core(*loaded.model, *loaded.tokenizer, options,
             std::vector<int>(loaded.model->kv_spec().groups.size(), n_blocks), 0, {}) {}
  // Adds the requests, steps until nothing is left (checking the pool after every step), and
  // returns their outputs in order.
  std::vector<Output> Run(const std::vector<Request>& requests) {
    std::vector<Output> out = testing::RunCoreChecked(core, requests);
    EngineStats stats;
    core.FillStats(stats);
    EXPECT_EQ(stats.blocks_used, 0);
    EXPECT_EQ(stats.running + stats.waiting, 0);
    return out;
  }
  EngineCore core;
};

std::vector<int32_t> Encode(const std::string& text) {
  return Stories().tokenizer->Encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::vector<int32_t> RandomPrompt(uint64_t seed, int length) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> prompt = {Stories().tokenizer->bos()};
  const int n_vocab = Stories().model->config().n_vocab;
  while (static_cast<int>(prompt.size()) < length) {
    prompt.push_back(3 + static_cast<int32_t>(rng() % (n_vocab - 3)));
  }
  return prompt;
}

Request ShiftRequest(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.logprobs = true;
  r.context_overflow = ContextOverflow::kShift;
  return r;
}

// The last token's logits of a fresh runner (its own new cache) over `tokens` at 0, 1, ...
std::vector<float> FreshLastLogits(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceRunner runner(model, KvType::kF32, static_cast<int>(tokens.size()), 1);
  auto logits = runner.Append(tokens);
  EXPECT_TRUE(logits.ok()) << logits.message();
  if (!logits.ok()) return {};
  return std::vector<float>(logits->begin(), logits->end());
}

const char kStory[] = "Once upon a time, there was a little girl named Lily. She loved to play";

TEST(ContextShiftPlanTest, HeadIsRoundedUpAndTheCutKeepsAboutHalfTheRest) {
  EXPECT_EQ(ContextShiftHead(4, 0, 16), 16);
  EXPECT_EQ(ContextShiftHead(4, 20, 16), 32);
  EXPECT_EQ(ContextShiftHead(0, 0, 16), 0);
  EXPECT_EQ(ContextShiftHead(4, 3, 1), 4);
  // 129 tokens in a context of 128, head 16: keep at most 56 after the head, drop whole blocks.
  const ContextShift cut = PlanContextShift(129, 128, 16, 16);
  EXPECT_EQ(cut.head, 16);
  EXPECT_EQ(cut.n_drop, 64);
  // A long prompt: the head and its latest tokens.
  EXPECT_EQ(PlanContextShift(300, 128, 16, 16).n_drop, 240);
  // Block size 1 (chat): exactly half of the rest stays.
  EXPECT_EQ(PlanContextShift(129, 128, 28, 1).n_drop, 51);
  for (int head : {0, 16, 32, 96}) {
    for (int n : {129, 130, 200, 1000}) {
      const ContextShift c = PlanContextShift(n, 128, head, 16);
      EXPECT_EQ(c.n_drop % 16, 0);
      EXPECT_GE(n - c.n_drop, head + 1) << n << " " << head;
      EXPECT_LE(n - c.n_drop, head + (128 - head) / 2) << n << " " << head;
    }
  }
  EXPECT_TRUE(CheckContextShiftHead(96, 128, 16).ok());
  const Status tight = CheckContextShiftHead(112, 128, 16);
  EXPECT_FALSE(tight.ok());
  EXPECT_NE(tight.message().find("112"), std::string::npos) << tight.message();
  EXPECT_NE(tight.message().find("128"), std::string::npos) << tight.message();
}

// 4x the context, greedy: the sequence never holds more than the context, its head (4 sinks and a
// pinned prefix of 20, so 32 tokens in 2 blocks) stays the first 32 tokens of the text and keeps
// its physical blocks, the rest of what it holds is the latest text, and the bookkeeping adds up.
TEST(ContextShiftTest, GeneratesFourContextsKeepingTheSinksAndThePinnedPrefix) {
  Core core(CoreOptions(), 16);
  Request r = ShiftRequest(Encode(kStory), 4 * kCtx);
  ASSERT_GE(r.prompt.size(), 16u);
  r.pinned_prefix_tokens = 20;
  const int head = 32;
  std::vector<int32_t> head_blocks;
  int max_held = 0, steps_after_shift = 0, last_shifts = 0;
  std::vector<int32_t> final_tokens, final_dropped;
  core.core.SetStepObserver([&](const StepPlan& plan, const StepLogits&) {
    ASSERT_EQ(plan.chunks.size(), 1u);
    const Sequence& seq = *plan.chunks[0].seq;
    EXPECT_EQ(seq.n_head, head);
    max_held = std::max(max_held, static_cast<int>(seq.tokens.size()));
    // Every token's K/V fits the context.
    EXPECT_LE(seq.n_computed + plan.chunks[0].n_tokens, kCtx);
    if (head_blocks.empty() && seq.n_computed >= head) {
      head_blocks.assign(seq.blocks.group(0).begin(), seq.blocks.group(0).begin() + head / kBlock);
    }
    if (!head_blocks.empty()) {
      EXPECT_TRUE(std::equal(head_blocks.begin(), head_blocks.end(), seq.blocks.group(0).begin()))
          << "the head's blocks changed";
    }
    if (seq.n_shifts != last_shifts) {
      ++steps_after_shift;
      last_shifts = seq.n_shifts;
      // Right after a cut: the head and a tail to recompute.
      EXPECT_EQ(seq.n_computed, head) << "the kept tail is recomputed";
      EXPECT_EQ(static_cast<int>(seq.blocks.keys.size()), head / kBlock);
    }
    final_tokens = seq.tokens;
    final_dropped = seq.dropped;
  });
  const std::vector<Output> out = core.Run({r});
  ASSERT_EQ(out.size(), 1u);
  const Output& o = out[0];
  EXPECT_EQ(o.finish_reason, FinishReason::kLength);
  ASSERT_EQ(static_cast<int>(o.tokens.size()), 4 * kCtx);
  EXPECT_EQ(o.usage.completion_tokens, 4 * kCtx);
  EXPECT_EQ(o.usage.prompt_tokens, static_cast<int>(r.prompt.size()));
  EXPECT_GE(o.usage.context_shifts, 6);
  EXPECT_EQ(steps_after_shift, o.usage.context_shifts);
  EXPECT_EQ(max_held, kCtx);
  EXPECT_EQ(head_blocks.size(), 2u);
  // The text is head + dropped + the rest, in order; the last token sampled is not held.
  std::vector<int32_t> full = r.prompt;
  full.insert(full.end(), o.tokens.begin(), o.tokens.end());
  full.pop_back();
  std::vector<int32_t> rebuilt(final_tokens.begin(), final_tokens.begin() + head);
  rebuilt.insert(rebuilt.end(), final_dropped.begin(), final_dropped.end());
  rebuilt.insert(rebuilt.end(), final_tokens.begin() + head, final_tokens.end());
  EXPECT_EQ(rebuilt, full);
  EXPECT_EQ(o.usage.dropped_tokens, static_cast<int>(final_dropped.size()));
  EXPECT_EQ(o.usage.dropped_tokens % kBlock, 0);
  // The first pinned tokens are the prompt's.
  EXPECT_TRUE(std::equal(r.prompt.begin(), r.prompt.begin() + 16, final_tokens.begin()));
  EngineStats stats;
  core.core.FillStats(stats);
  EXPECT_EQ(stats.shifted_requests, 1u);
  EXPECT_EQ(stats.context_shifts, static_cast<uint64_t>(o.usage.context_shifts));
  EXPECT_EQ(stats.shift_dropped_tokens, static_cast<uint64_t>(o.usage.dropped_tokens));
  EXPECT_GT(stats.shift_recomputed_tokens, 0u);
}

// Every logits row the engine samples from, before and after each shift, is bit for bit the last
// row of a fresh forward (a new cache, one batch) over the tokens the sequence holds at positions
// 0, 1, ...; sampled with penalties, the tokens are those of a sampler replayed over those rows
// with the whole text as its history (the dropped tokens still count).
TEST(ContextShiftTest, LogitsAfterAShiftEqualAFreshForwardOverTheKeptTokens) {
  const Model& model = *Stories().model;
  const int n_vocab = model.config().n_vocab;
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled with penalties" : "greedy");
    Core core(CoreOptions(), 16);
    Request r = ShiftRequest(Encode(kStory), 3 * kCtx);
    if (sampled) {
      r.sampling = SamplingParams{.temperature = 0.9f,
                                  .top_k = 40,
                                  .repetition_penalty = 1.3f,
                                  .frequency_penalty = 0.4f,
                                  .seed = 11};
    }
    std::vector<std::vector<float>> rows;
    int n_checked_after_shift = 0;
    core.core.SetStepObserver([&](const StepPlan& plan, const StepLogits& logits) {
      const ScheduledChunk& chunk = plan.chunks[0];
      if (!chunk.sample) return;
      const Sequence& seq = *chunk.seq;
      const std::vector<float> fresh = testing::AllPositionLogits(model, seq.tokens);
      const std::span<const float> last =
          std::span<const float>(fresh).subspan(fresh.size() - n_vocab);
      ASSERT_EQ(logits.n_rows(), 1u);
      EXPECT_EQ(0, std::memcmp(logits.row(0).data(), last.data(), n_vocab * sizeof(float)))
          << "after " << seq.n_shifts << " shifts, " << seq.tokens.size() << " tokens held";
      if (seq.n_shifts > 0) ++n_checked_after_shift;
      rows.emplace_back(logits.row(0).begin(), logits.row(0).end());
    });
    const Output o = core.Run({r})[0];
    ASSERT_EQ(static_cast<int>(o.tokens.size()), 3 * kCtx);
    EXPECT_GE(o.usage.context_shifts, 4);
    EXPECT_GT(n_checked_after_shift, 2 * kCtx);
    ASSERT_EQ(rows.size(), o.tokens.size());
    if (!sampled) continue;
    // Replays: with the whole text as history the engine's tokens come out; with only what the
    // sequence would hold after the cuts they would not (so the dropped tokens do count here).
    Sampler whole(r.sampling, n_vocab), kept_only(r.sampling, n_vocab);
    std::vector<int32_t> text = r.prompt;
    bool kept_differs = false;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(whole.Sample(rows[i], text).token, o.tokens[i]) << "token " << i;
      const size_t window = std::min<size_t>(text.size(), kCtx / 2);
      const std::span<const int32_t> recent(text.data() + text.size() - window, window);
      kept_differs |= kept_only.Sample(rows[i], recent).token != o.tokens[i];
      text.push_back(o.tokens[i]);
    }
    EXPECT_TRUE(kept_differs);
  }
}

// The same on other position schemes, with a context of 64 (2 shifts per 64 tokens): gpt2's
// learned positions (which no key rotation could move), gemma2's sliding-window layers (window 8)
// and soft-caps, qwen2's split-half RoPE with biases, llama3, and gpt-oss's learned sinks with
// YaRN and a window of 8 (its sinks are logits, not tokens: docs/kv-cache.md).
TEST(ContextShiftTest, LogitsAfterShiftsEqualAFreshForwardOnOtherArchitectures) {
  const std::string gpt_oss =
      testing::SynthesizedModel("gpt-oss-tiny", "gpt-oss-tiny-f32", GgmlType::kF32);
  for (const std::string& path :
       {testing::ModelPath("gpt2-tiny-f32.gguf"), testing::ModelPath("arch/gemma2-f32.gguf"),
        testing::ModelPath("arch/qwen2-f32.gguf"), testing::ModelPath("arch/llama3-f32.gguf"),
        gpt_oss}) {
    SCOPED_TRACE(path);
    Loaded loaded;
    auto model = LoadModel(path, TestBackend());
    ASSERT_TRUE(model.ok()) << model.message();
    loaded.model = std::move(model).value();
    auto tokenizer = Tokenizer::FromGguf(loaded.model->file());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    loaded.tokenizer = std::move(tokenizer).value();
    EngineOptions options = CoreOptions();
    options.n_ctx = 64;
    Core core(options, 8, loaded);
    std::vector<int32_t> prompt;
    if (loaded.tokenizer->bos() >= 0) prompt.push_back(loaded.tokenizer->bos());
    for (int32_t t = 0; t < 20; ++t) prompt.push_back(100 + 7 * t);
    const int n_vocab = loaded.model->config().n_vocab;
    int n_after_shift = 0;
    core.core.SetStepObserver([&](const StepPlan& plan, const StepLogits& logits) {
      const Sequence& seq = *plan.chunks[0].seq;
      if (!plan.chunks[0].sample) return;
      const std::vector<float> fresh = FreshLastLogits(*loaded.model, seq.tokens);
      ASSERT_EQ(fresh.size(), static_cast<size_t>(n_vocab));
      EXPECT_EQ(0, std::memcmp(logits.row(0).data(), fresh.data(), n_vocab * sizeof(float)))
          << "after " << seq.n_shifts << " shifts, " << seq.tokens.size() << " tokens held";
      n_after_shift += seq.n_shifts > 0;
    });
    const Output o = core.Run({ShiftRequest(prompt, 3 * 64)})[0];
    EXPECT_EQ(o.tokens.size(), 3u * 64);
    EXPECT_GE(o.usage.context_shifts, 5);
    EXPECT_GT(n_after_shift, 2 * 64);
  }
}

// Several requests at once, some shifting (one with a prompt longer than the context, one with
// stop strings, sampled ones with penalties), some within the context under "error": each gives
// what it gives alone, also in a pool so small that shifted sequences are preempted and
// recomputed; the pool's invariants hold after every step and nothing stays referenced.
TEST(ContextShiftTest, ConcurrentShiftingRequestsGiveWhatTheyGiveAlone) {
  std::vector<Request> requests;
  requests.push_back(ShiftRequest(Encode(kStory), 300));
  Request b = ShiftRequest(Encode("The dog ran"), 260);
  b.sampling =
      SamplingParams{.temperature = 0.8f, .top_k = 40, .repetition_penalty = 1.2f, .seed = 7};
  requests.push_back(b);
  Request c = ShiftRequest(Encode("Tom had a red ball"), 60);
  c.context_overflow = ContextOverflow::kError;
  requests.push_back(c);
  Request d = ShiftRequest(RandomPrompt(5, 200), 100);
  d.pinned_prefix_tokens = 8;
  d.sampling = SamplingParams{.temperature = 1.0f, .presence_penalty = 0.5f, .seed = 3};
  requests.push_back(d);
  Request e = ShiftRequest(Encode(kStory), 200);
  e.pinned_prefix_tokens = 40;
  e.stop = {"park"};
  e.ignore_eos = false;
  requests.push_back(e);
  Request f = ShiftRequest(RandomPrompt(9, 28), kCtx - 28);
  f.context_overflow = ContextOverflow::kError;  // fills the context exactly
  requests.push_back(f);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = "r" + std::to_string(i);

  std::vector<Output> alone;
  for (const Request& r : requests) {
    Core core(CoreOptions(), 16);
    alone.push_back(core.Run({r})[0]);
  }
  EXPECT_GT(alone[0].usage.dropped_tokens, 0);
  EXPECT_GT(alone[3].usage.dropped_tokens, 0);
  EXPECT_EQ(alone[2].usage.dropped_tokens, 0);
  EXPECT_EQ(alone[5].finish_reason, FinishReason::kLength);
  EXPECT_EQ(static_cast<int>(alone[5].tokens.size()), kCtx - 28);
  EXPECT_EQ(alone[5].usage.dropped_tokens, 0);

  Core together(CoreOptions(), 64);
  const std::vector<Output> batched = together.Run(requests);
  EngineOptions small = CoreOptions();
  small.max_batched_tokens = 48;  // chunked recomputes
  Core squeezed(small, 14);       // room for less than two full contexts: preemptions
  const std::vector<Output> preempted = squeezed.Run(requests);
  EXPECT_GT(squeezed.core.scheduler().preemptions(), 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    ExpectSame(alone[i], batched[i], "batched " + requests[i].id);
    ExpectSame(alone[i], preempted[i], "preempted " + requests[i].id);
  }
}

// Through the threaded engine: a repeated request hits the prefix cache and answers the same as
// an engine without one; a prompt made of the tokens a shifted sequence kept finds the blocks
// that sequence recomputed (keyed by the kept tokens) and continues as it did.
TEST(ContextShiftTest, PrefixCacheAcrossAShiftChangesNoToken) {
  const Loaded& s = Stories();
  EngineOptions options = CoreOptions();
  options.context_overflow = ContextOverflow::kShift;
  auto cached = Engine::Create(*s.model, *s.tokenizer, options);
  ASSERT_TRUE(cached.ok()) << cached.message();
  options.prefix_caching = false;
  auto uncached = Engine::Create(*s.model, *s.tokenizer, options);
  ASSERT_TRUE(uncached.ok()) << uncached.message();
  auto run = [](Engine& engine, const Request& r) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) return Output{};
    return Collect(**stream, std::chrono::seconds(60));
  };
  Request a = ShiftRequest(Encode(kStory), 200);
  a.context_overflow = ContextOverflow::kDefault;  // the engine's policy: shift
  const Output first = run(**cached, a);
  const Output again = run(**cached, a);
  const Output fresh = run(**uncached, a);
  EXPECT_GT(first.usage.dropped_tokens, 0);
  ExpectSame(first, again, "cached again");
  ExpectSame(first, fresh, "without a prefix cache");
  EXPECT_GT(again.usage.cached_tokens, 0);

  // What the sequence held right after its first cut, and the 20 tokens it sampled next.
  std::vector<int32_t> text = a.prompt;
  text.insert(text.end(), first.tokens.begin(), first.tokens.end());
  const int head = ContextShiftHead(options.sink_tokens, 0, kBlock);
  const ContextShift cut = PlanContextShift(kCtx + 1, kCtx, head, kBlock);
  std::vector<int32_t> kept(text.begin(), text.begin() + kCtx + 1);
  kept.erase(kept.begin() + head, kept.begin() + head + cut.n_drop);
  const std::vector<int32_t> next(text.begin() + kCtx + 1, text.begin() + kCtx + 21);
  Request k = ShiftRequest(kept, 20);
  k.context_overflow = ContextOverflow::kError;
  const Output continued = run(**cached, k);
  EXPECT_EQ(continued.tokens, next);
  EXPECT_GT(continued.usage.cached_tokens, head) << "the recomputed blocks were not registered";
  const Output continued_fresh = run(**uncached, k);
  ExpectSame(continued, continued_fresh, "kept prompt without a prefix cache");
  (*cached)->Drain(std::chrono::seconds(60));
  EXPECT_EQ((*cached)->Stats().blocks_used, 0);
  EXPECT_GT((*cached)->Stats().context_shifts, 0u);
}

// The same request again on one engine core: after each cut it takes the blocks the first run
// recomputed for the kept tokens (ExtendPrefix), so it recomputes less, with the same answer.
TEST(ContextShiftTest, ARepeatedRequestTakesTheRecomputedBlocksFromThePrefixCache) {
  Core core(CoreOptions(), 32);
  const Request r = ShiftRequest(Encode(kStory), 300);
  EngineStats before, after_first, after_second;
  core.core.FillStats(before);
  const Output first = core.Run({r})[0];
  core.core.FillStats(after_first);
  const Output second = core.Run({r})[0];
  core.core.FillStats(after_second);
  ExpectSame(first, second, "again");
  const uint64_t first_recompute =
      after_first.shift_recomputed_tokens - before.shift_recomputed_tokens;
  const uint64_t second_recompute =
      after_second.shift_recomputed_tokens - after_first.shift_recomputed_tokens;
  EXPECT_GT(first_recompute, 0u);
  EXPECT_LT(second_recompute, first_recompute / 4);
  EXPECT_EQ(after_second.context_shifts - after_first.context_shifts,
            after_first.context_shifts - before.context_shifts);
}

// Speculative decoding (prompt lookup, and a draft model: stories260K drafting for itself)
// verifies drafts across shifts without changing a token or a logprob.
TEST(ContextShiftTest, SpeculativeDecodingAcrossShiftsChangesNoToken) {
  const Loaded& s = Stories();
  std::vector<Request> requests = {ShiftRequest(Encode(kStory), 300),
                                   ShiftRequest(Encode("The dog ran"), 280)};
  requests[1].sampling = SamplingParams{.temperature = 0.7f, .seed = 5};
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = "s" + std::to_string(i);
  auto run_all = [&](const EngineOptions& options) {
    auto engine = Engine::Create(*s.model, *s.tokenizer, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : requests) streams.push_back(*(*engine)->Submit(r));
    std::vector<Output> out;
    for (auto& stream : streams) out.push_back(Collect(*stream, std::chrono::seconds(60)));
    (*engine)->Drain(std::chrono::seconds(60));  // the stats of the last step are published
    const EngineStats stats = (*engine)->Stats();
    EXPECT_EQ(stats.blocks_used, 0);
    return std::make_pair(out, stats);
  };
  const auto [plain, plain_stats] = run_all(CoreOptions());
  EXPECT_GT(plain[0].usage.dropped_tokens, 0);
  EngineOptions ngram = CoreOptions();
  ngram.spec.method = SpecMethod::kNgram;
  EngineOptions draft = CoreOptions();
  draft.spec.method = SpecMethod::kDraft;
  draft.spec.draft_model = s.model.get();
  for (const EngineOptions& options : {ngram, draft}) {
    const auto [spec, stats] = run_all(options);
    EXPECT_GT(stats.spec_accepted_tokens, 0u);
    EXPECT_GT(stats.context_shifts, 0u);
    for (size_t i = 0; i < requests.size(); ++i) ExpectSame(plain[i], spec[i], requests[i].id);
  }
}

// A prompt longer than the context, shifting: its head and latest tokens, then what a fresh
// generation over those gives; "error" refuses it as before.
TEST(ContextShiftTest, APromptLongerThanTheContextKeepsItsHeadAndEnd) {
  const Loaded& s = Stories();
  auto engine = Engine::Create(*s.model, *s.tokenizer, CoreOptions());
  ASSERT_TRUE(engine.ok()) << engine.message();
  const std::vector<int32_t> prompt = RandomPrompt(21, 300);
  Request r = ShiftRequest(prompt, 40);
  r.pinned_prefix_tokens = 8;
  auto stream = (*engine)->Submit(r);
  ASSERT_TRUE(stream.ok()) << stream.message();
  const Output o = Collect(**stream, std::chrono::seconds(60));
  const int head = 16;  // 4 sinks and 8 pinned, one block
  const ContextShift cut = PlanContextShift(300, kCtx, head, kBlock);
  std::vector<int32_t> kept = prompt;
  kept.erase(kept.begin() + head, kept.begin() + head + cut.n_drop);
  ASSERT_LE(kept.size() + 40, static_cast<size_t>(kCtx));
  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(o.tokens,
            testing::ReferenceGenerate(*s.model, *s.tokenizer, kept, 40, greedy, true, kCtx));
  EXPECT_EQ(o.usage.prompt_tokens, 300);
  EXPECT_EQ(o.usage.dropped_tokens, cut.n_drop);
  EXPECT_EQ(o.usage.context_shifts, 1);
  EXPECT_EQ(o.usage.completion_tokens, 40);

  r.context_overflow = ContextOverflow::kError;
  auto refused = (*engine)->Submit(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("exceeds the context size 128"), std::string::npos)
      << refused.message();
}

// "error" (the default) is what it was: too long is refused, generation ends at the context; an
// impossible head is refused by name.
TEST(ContextShiftTest, ErrorPolicyIsUnchangedAndBadHeadsAreRefused) {
  const Loaded& s = Stories();
  auto engine = Engine::Create(*s.model, *s.tokenizer, CoreOptions());
  ASSERT_TRUE(engine.ok()) << engine.message();
  Request r = ShiftRequest(Encode(kStory), 200);
  r.context_overflow = ContextOverflow::kDefault;
  auto refused = (*engine)->Submit(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("max_tokens 200"), std::string::npos) << refused.message();
  r.max_tokens = kCtx - static_cast<int>(r.prompt.size()) + 1;  // one past the context
  EXPECT_FALSE((*engine)->Submit(r).ok());
  r.max_tokens = kCtx - static_cast<int>(r.prompt.size());
  auto stream = (*engine)->Submit(r);
  ASSERT_TRUE(stream.ok()) << stream.message();
  const Output full = Collect(**stream, std::chrono::seconds(60));
  EXPECT_EQ(full.finish_reason, FinishReason::kLength);
  EXPECT_EQ(full.tokens.size(), static_cast<size_t>(r.max_tokens));
  EXPECT_EQ(full.usage.dropped_tokens, 0);

  Request pinned = ShiftRequest(Encode(kStory), 10);
  pinned.pinned_prefix_tokens = 10;
  pinned.prompt = RandomPrompt(2, 120);
  pinned.pinned_prefix_tokens = 100;  // 112 with rounding: no room for two blocks
  auto too_long = (*engine)->Submit(pinned);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("112"), std::string::npos) << too_long.message();
  pinned.pinned_prefix_tokens = -1;
  EXPECT_FALSE((*engine)->Submit(pinned).ok());

  EngineOptions sinks = CoreOptions();
  sinks.context_overflow = ContextOverflow::kShift;
  sinks.sink_tokens = 120;
  auto bad = Engine::Create(*s.model, *s.tokenizer, sinks);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("context_overflow shift"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace kvserve
