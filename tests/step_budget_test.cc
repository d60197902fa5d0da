// The per-step time target (--max-step-ms): the step cost model's fit, the scheduler's prefill
// chunks under a given cost (bounded while streams decode, never below the floor, the whole
// budget when off, unknown or with nothing decoding), the serving engine on a real model giving
// the same tokens and log-probabilities with and without the target (the kernels are batch
// invariant, so chunk sizes change no bit), and the flag's errors.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/flag_table.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/step_cost.h"
#include "kv/block_manager.h"
#include "support/fake_model.h"
#include "support/reference_runs.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::kFakeFirstNormal;
using testing::kFakeNormalTokens;
using testing::LoadOrDie;

// ---- StepCostModel ---------------------------------------------------------------------------

TEST(StepCostModel, UnknownUntilAStepIsObserved) {
  StepCostModel model;
  EXPECT_FALSE(model.cost().known());
  model.Observe(0, 5.0);   // no tokens: ignored
  model.Observe(8, -1.0);  // no time: ignored
  EXPECT_FALSE(model.cost().known());
  EXPECT_EQ(model.observed(), 0);
}

TEST(StepCostModel, FitsTheLineOfVaryingSteps) {
  StepCostModel model(0.2);
  const int sizes[] = {16, 200, 17, 64, 16, 512, 30};
  for (int round = 0; round < 5; ++round) {
    for (int n : sizes) model.Observe(n, 20.0 + 3.0 * n);
  }
  const StepCost cost = model.cost();
  EXPECT_NEAR(cost.fixed_ms, 20.0, 1e-6);
  EXPECT_NEAR(cost.ms_per_token, 3.0, 1e-9);
  EXPECT_NEAR(cost.Predict(100), 320.0, 1e-6);
}

// Steps of one size cannot separate the fixed part: time per token through the origin, which
// over-predicts larger steps (so chunks err small).
TEST(StepCostModel, StepsOfOneSizeGiveTimePerToken) {
  StepCostModel model;
  for (int i = 0; i < 10; ++i) model.Observe(16, 20.0 + 3.0 * 16);
  const StepCost cost = model.cost();
  EXPECT_EQ(cost.fixed_ms, 0.0);
  EXPECT_NEAR(cost.ms_per_token, 68.0 / 16, 1e-9);
  EXPECT_GT(cost.Predict(200), 20.0 + 3.0 * 200);
}

// A fit with a negative intercept (here: bigger steps cheaper per token than a line through the
// origin allows) falls back to time per token too, never to a negative fixed part.
TEST(StepCostModel, NeverPredictsANegativeFixedPart) {
  StepCostModel model(0.5);
  for (int i = 0; i < 6; ++i) {
    model.Observe(10, 10.0);
    model.Observe(100, 1000.0);
  }
  const StepCost cost = model.cost();
  EXPECT_GE(cost.fixed_ms, 0.0);
  EXPECT_GT(cost.ms_per_token, 0.0);
}

// The weights forget: after a change of machine speed the fit follows the new steps.
TEST(StepCostModel, FollowsAChangeOfSpeed) {
  StepCostModel model(0.2);
  for (int i = 0; i < 20; ++i) {
    model.Observe(16, 10.0 + 1.0 * 16);
    model.Observe(128, 10.0 + 1.0 * 128);
  }
  for (int i = 0; i < 60; ++i) {
    model.Observe(16, 10.0 + 4.0 * 16);
    model.Observe(128, 10.0 + 4.0 * 128);
  }
  EXPECT_NEAR(model.cost().ms_per_token, 4.0, 0.01);
}

// ---- The scheduler under a given cost --------------------------------------------------------

class StepBudget : public ::testing::Test {
 protected:
  std::unique_ptr<Sequence> MakeSequence(int prompt_length, int max_tokens) {
    Request r;
    for (int i = 0; i < prompt_length; ++i) {
      r.prompt.push_back(kFakeFirstNormal + (next_id_ * 7 + i) % kFakeNormalTokens);
    }
    r.max_tokens = max_tokens;
    r.id = "r" + std::to_string(next_id_++);
    return std::make_unique<Sequence>(r, std::make_shared<RequestStream>(), *tokenizer_,
                                      tokenizer_->n_vocab(), 4096);
  }
  struct StepSummary {
    int n_tokens = 0;
    int n_decode = 0;           // chunks of one token that sample
    int n_prefill = 0;          // tokens of the other chunks
    int n_decoding_before = 0;  // running sequences with one pending token before the step
    int allowance = 0;
  };
  // Schedules one step, "samples" a normal token for every chunk that samples and removes the
  // sequences that finished.
  StepSummary Step(Scheduler& s, BlockManager& m) {
    StepSummary out;
    for (const auto& seq : s.running()) out.n_decoding_before += seq->n_pending() == 1;
    out.allowance = s.PrefillAllowance();
    const StepPlan plan = s.Schedule();
    StepSamples sampled;
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.sample && c.n_tokens == 1) {
        ++out.n_decode;
      } else {
        out.n_prefill += c.n_tokens;
      }
      if (c.sample) sampled.push_back({SampleResult{.token = kFakeFirstNormal}});
    }
    out.n_tokens = plan.n_tokens;
    for (const SequenceOutput& o : s.Postprocess(plan, sampled)) {
      if (o.outcome.finish != FinishReason::kNone) s.Remove(o.seq);
    }
    EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
    return out;
  }
  bool Done(const Scheduler& s) const { return s.running().empty() && s.waiting().empty(); }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::FakeTokenizer();
  int next_id_ = 0;
};

// Four streams decode while two long prompts arrive: every step keeps each stream's decode
// token, and its predicted time (10 ms + 1 ms a token) stays within the 100 ms target: 86
// prefill tokens next to 4 decodes. Before anything decodes, the whole budget prefills.
TEST_F(StepBudget, PrefillChunksKeepThePredictedStepUnderTheTarget) {
  BlockManager m(512, 4, true);
  Scheduler s(m, {.max_num_seqs = 8, .max_batched_tokens = 512, .max_step_ms = 100}, nullptr);
  const StepCost cost{.fixed_ms = 10, .ms_per_token = 1};
  s.SetStepCost(cost);
  for (int i = 0; i < 4; ++i) s.Add(MakeSequence(3, 60));
  const StepSummary first = Step(s, m);
  EXPECT_EQ(first.n_decoding_before, 0);
  EXPECT_EQ(first.allowance, 512);
  EXPECT_EQ(first.n_prefill, 12);  // four whole 3-token prompts
  EXPECT_EQ(first.n_decode, 0);
  s.Add(MakeSequence(300, 4));
  s.Add(MakeSequence(250, 4));
  std::vector<int> prefill_chunks;
  int steps = 0;
  for (; !Done(s); ++steps) {
    ASSERT_LT(steps, 200);
    const StepSummary step = Step(s, m);
    if (step.n_decoding_before > 0) {
      EXPECT_EQ(step.allowance, 90 - step.n_decoding_before);
      EXPECT_LE(cost.Predict(step.n_tokens), 100.0) << "step " << steps;
      // Every decoding sequence got its token (the long prompts never crowd a stream out).
      EXPECT_GE(step.n_decode, step.n_decoding_before) << "step " << steps;
    }
    if (step.n_prefill > 0) prefill_chunks.push_back(step.n_prefill);
  }
  // 300 + 250 prompt tokens: 86 a step next to 4 streams, 85 once the first long one decodes
  // too, the rest in a last chunk.
  EXPECT_EQ(prefill_chunks, (std::vector<int>{86, 86, 86, 86, 85, 85, 36}));
  EXPECT_EQ(m.Stats().used, 0);
}

// With max_step_decodes 3 on a fast model (10 ms + 1 ms a token), a step next to n decoding
// streams takes at most 3 of their decode-only steps, 3 * (10 + n) ms, far under the 100 ms
// target: 20 + 2n prefill tokens. On a slow model (10 ms a token) the 100 ms target is the lower
// one and decides, as without max_step_decodes.
TEST_F(StepBudget, AtMostThreeDecodeStepsOnAFastModel) {
  BlockManager m(512, 4, true);
  Scheduler s(
      m, {.max_num_seqs = 8, .max_batched_tokens = 512, .max_step_ms = 100, .max_step_decodes = 3},
      nullptr);
  const StepCost cost{.fixed_ms = 10, .ms_per_token = 1};
  s.SetStepCost(cost);
  for (int i = 0; i < 4; ++i) s.Add(MakeSequence(3, 60));
  EXPECT_EQ(Step(s, m).allowance, 512);  // nothing decodes yet
  s.Add(MakeSequence(300, 4));
  int checked = 0;
  for (int steps = 0; !Done(s); ++steps) {
    ASSERT_LT(steps, 200);
    const StepSummary step = Step(s, m);
    if (step.n_decoding_before == 0) continue;
    EXPECT_EQ(step.allowance, 20 + 2 * step.n_decoding_before) << "step " << steps;
    EXPECT_LE(cost.Predict(step.n_tokens), 3 * cost.Predict(step.n_decoding_before))
        << "step " << steps;
    EXPECT_GE(step.n_decode, step.n_decoding_before) << "step " << steps;
    ++checked;
  }
  EXPECT_GT(checked, 10);
  EXPECT_EQ(m.Stats().used, 0);

  BlockManager slow_blocks(512, 4, true);
  Scheduler slow(
      slow_blocks,
      {.max_num_seqs = 8, .max_batched_tokens = 512, .max_step_ms = 100, .max_step_decodes = 3},
      nullptr);
  slow.SetStepCost({.fixed_ms = 10, .ms_per_token = 10});
  slow.Add(MakeSequence(3, 60));
  Step(slow, slow_blocks);
  EXPECT_EQ(slow.PrefillAllowance(), 16);  // (100 - 10) / 10 - 1 = 8: the floor
}

// A target the fixed part alone exceeds still lets max(min_prefill_tokens, block size) prompt
// tokens through each step: prefill always progresses.
TEST_F(StepBudget, ATargetBelowTheFixedCostStillPrefillsTheFloor) {
  for (int block_size : {4, 32}) {
    SCOPED_TRACE(block_size);
    BlockManager m(512, block_size, true);
    Scheduler s(m, {.max_num_seqs = 8, .max_batched_tokens = 512, .max_step_ms = 5}, nullptr);
    s.SetStepCost({.fixed_ms = 50, .ms_per_token = 2});
    s.Add(MakeSequence(2, 40));
    Step(s, m);
    s.Add(MakeSequence(200, 2));
    const int floor = std::max(16, block_size);
    int prefilled = 0;
    for (int steps = 0; prefilled < 200; ++steps) {
      ASSERT_LT(steps, 100);
      const StepSummary step = Step(s, m);
      EXPECT_EQ(step.allowance, floor);
      EXPECT_EQ(step.n_decode, 1);
      EXPECT_EQ(step.n_prefill, std::min(floor, 200 - prefilled));
      prefilled += step.n_prefill;
    }
  }
}

// Off (0), with no measured cost yet, or with nothing decoding, the allowance is the token
// budget: today's chunks (the budget minus the decode tokens).
TEST_F(StepBudget, OffUnknownOrNothingDecodingMeansTheWholeBudget) {
  struct Case {
    double max_step_ms;
    StepCost cost;
  };
  for (const Case& c : {Case{0, {.fixed_ms = 10, .ms_per_token = 1}}, Case{100, {}}}) {
    BlockManager m(512, 4, true);
    Scheduler s(m, {.max_num_seqs = 8, .max_batched_tokens = 128, .max_step_ms = c.max_step_ms},
                nullptr);
    s.SetStepCost(c.cost);
    s.Add(MakeSequence(3, 40));
    s.Add(MakeSequence(3, 40));
    Step(s, m);
    s.Add(MakeSequence(400, 2));
    const StepSummary step = Step(s, m);
    EXPECT_EQ(step.allowance, 128);
    EXPECT_EQ(step.n_decode, 2);
    EXPECT_EQ(step.n_prefill, 126);
  }
  BlockManager m(512, 4, true);
  Scheduler s(m, {.max_num_seqs = 8, .max_batched_tokens = 128, .max_step_ms = 20}, nullptr);
  s.SetStepCost({.fixed_ms = 10, .ms_per_token = 1});
  s.Add(MakeSequence(400, 2));
  const StepSummary alone = Step(s, m);
  EXPECT_EQ(alone.allowance, 128);
  EXPECT_EQ(alone.n_prefill, 128);
}

// Drafted tokens (speculative decoding) count against the allowance like prefill tokens: with
// 4 streams, 1 ms a token and a 10 ms target, 6 drafts are verified in all; off, all 20 are.
TEST_F(StepBudget, DraftsShareTheAllowance) {
  for (double target : {10.0, 0.0}) {
    SCOPED_TRACE(target);
    BlockManager m(512, 1, true);
    Scheduler s(m,
                {.max_num_seqs = 8,
                 .max_batched_tokens = 512,
                 .max_step_ms = target,
                 .min_prefill_tokens = 1},
                nullptr);
    s.SetStepCost({.fixed_ms = 0, .ms_per_token = 1});
    for (int i = 0; i < 4; ++i) s.Add(MakeSequence(3, 40));
    Step(s, m);
    for (const auto& seq : s.running()) seq->draft = {5, 6, 7, 8, 9};
    EXPECT_EQ(s.PrefillAllowance(), target > 0 ? 6 : 512);
    const StepPlan plan = s.Schedule();
    int n_draft = 0;
    for (const ScheduledChunk& c : plan.chunks) n_draft += c.n_draft;
    EXPECT_EQ(n_draft, target > 0 ? 6 : 20);
    EXPECT_EQ(plan.n_tokens, 4 + n_draft);
  }
}

// ---- The engine on a real model --------------------------------------------------------------

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

std::vector<Output> RunAll(Engine& engine, const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (stream.ok()) streams.push_back(*stream);
  }
  std::vector<Output> outputs;
  for (auto& stream : streams) {
    Output out;
    for (;;) {
      auto event = stream->Next(std::chrono::seconds(60));
      EXPECT_TRUE(event.has_value()) << "no event within 60 s";
      if (!event || event->kind == RequestEvent::Kind::kFinish) break;
      out.tokens.push_back(event->token);
      out.logprobs.push_back(event->logprob);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

// 24 requests with prompts of 1 to 120 tokens, sampled and greedy: with a target far below any
// step's time every prefill next to a decode is cut to the 16-token floor (more steps), and each
// request gets exactly the tokens and log-probabilities it gets without a target.
TEST(StepBudgetEngine, TheTargetChangesNoTokenOfManyConcurrentRequests) {
  auto model = LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  auto tokenizer = Tokenizer::FromGguf(model->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const int n_vocab = (*tokenizer)->n_vocab();
  std::mt19937_64 rng(17);
  std::vector<Request> requests;
  for (int i = 0; i < 24; ++i) {
    Request r;
    r.prompt = {static_cast<int32_t>((*tokenizer)->bos())};
    const int length = 1 + static_cast<int>(rng() % 120);
    for (int j = 0; j < length; ++j)
      r.prompt.push_back(3 + static_cast<int>(rng() % (n_vocab - 3)));
    r.max_tokens = 4 + static_cast<int>(rng() % 28);
    r.ignore_eos = true;
    r.logprobs = true;
    r.sampling.temperature = i % 3 == 0 ? 0.0f : 0.8f;
    r.sampling.seed = 900 + i;
    requests.push_back(r);
  }
  const EngineOptions base{
      .n_threads = 2, .n_ctx = 192, .block_size = 4, .max_num_seqs = 16, .max_batched_tokens = 96};
  std::vector<Output> reference;
  uint64_t reference_steps = 0;
  {
    auto engine = Engine::Create(*model, **tokenizer, base);
    ASSERT_TRUE(engine.ok()) << engine.message();
    reference = RunAll(**engine, requests);
    reference_steps = (*engine)->Stats().steps;
  }
  EngineOptions bounded = base;
  bounded.max_step_ms = 1e-6;
  auto engine = Engine::Create(*model, **tokenizer, bounded);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const std::vector<Output> outputs = RunAll(**engine, requests);
  ASSERT_EQ(outputs.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(static_cast<int>(reference[i].tokens.size()), requests[i].max_tokens);
    EXPECT_EQ(outputs[i].tokens, reference[i].tokens) << "request " << i;
    EXPECT_EQ(outputs[i].logprobs, reference[i].logprobs) << "request " << i;
  }
  EXPECT_GT((*engine)->Stats().steps, reference_steps) << "the target never cut a chunk";
}

TEST(StepBudgetEngine, CreateRejectsANegativeTarget) {
  auto model = LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  auto tokenizer = Tokenizer::FromGguf(model->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  auto engine = Engine::Create(*model, **tokenizer, {.n_threads = 1, .max_step_ms = -1});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("max_step_ms"), std::string::npos) << engine.message();
}

// ---- The flag --------------------------------------------------------------------------------

std::string FlagError(const std::vector<std::string>& argv) {
  const FlagGroup engine_flags = EngineFlags();
  const FlagTable table{.usage = "", .groups = {engine_flags}};
  auto args = Args::Parse(argv, table);
  if (!args.ok()) return args.message();
  auto options = ReadEngineOptions(*args, ModelOptions{});
  return options.ok() ? "" : options.message();
}

TEST(StepBudgetFlag, ReadsTheTargetAndNamesTheFlagAndValueInErrors) {
  const FlagGroup engine_flags = EngineFlags();
  const FlagTable table{.usage = "", .groups = {engine_flags}};
  auto off = ReadEngineOptions(*Args::Parse({}, table), ModelOptions{});
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_EQ(off->max_step_ms, 0.0);
  EXPECT_EQ(table.Find("--max-step-ms")->default_text, "0");
  auto on = ReadEngineOptions(*Args::Parse({"--max-step-ms", "250.5"}, table), ModelOptions{});
  ASSERT_TRUE(on.ok()) << on.message();
  EXPECT_EQ(on->max_step_ms, 250.5);
  EXPECT_EQ(FlagError({"--max-step-ms", "fast"}), "flag --max-step-ms: 'fast' is not a number");
  EXPECT_EQ(FlagError({"--max-step-ms", "-5"}),
            "flag --max-step-ms: '-5' is out of range (0 to 10000000 ms)");
  EXPECT_EQ(FlagError({"--max-step-ms", "nan"}),
            "flag --max-step-ms: 'nan' is out of range (0 to 10000000 ms)");
  EXPECT_EQ(FlagError({"--max-step-ms"}), "flag --max-step-ms needs a value (MS)");
  EXPECT_EQ(off->max_step_decodes, 0.0);
  auto decodes =
      ReadEngineOptions(*Args::Parse({"--max-step-decodes", "2.5"}, table), ModelOptions{});
  ASSERT_TRUE(decodes.ok()) << decodes.message();
  EXPECT_EQ(decodes->max_step_decodes, 2.5);
  EXPECT_EQ(FlagError({"--max-step-decodes", "-1"}),
            "flag --max-step-decodes: '-1' is out of range (0 to 1000000)");
}

// `serve` shows and uses its own default (on); the other commands' is off.
TEST(StepBudgetFlag, ServeDefaultsToItsTargetTheOthersToOff) {
  const FlagTable serve = ServeFlagTable();
  ASSERT_NE(serve.Find("--max-step-ms"), nullptr);
  EXPECT_EQ(serve.Find("--max-step-ms")->default_text, "500");
  auto args = Args::Parse({"-m", "x.gguf"}, serve);
  ASSERT_TRUE(args.ok()) << args.message();
  auto on = ReadEngineOptions(*args, ModelOptions{}, kServeMaxStepMs, kServeMaxStepDecodes);
  ASSERT_TRUE(on.ok()) << on.message();
  EXPECT_EQ(on->max_step_ms, 500.0);
  EXPECT_EQ(on->max_step_decodes, 3.0);
  EXPECT_EQ(serve.Find("--max-step-decodes")->default_text, "3");
  auto off = ReadEngineOptions(*Args::Parse({"-m", "x.gguf", "--max-step-ms", "0"}, serve),
                               ModelOptions{}, kServeMaxStepMs);
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_EQ(off->max_step_ms, 0.0);
  for (const FlagTable& table : {RunFlagTable(), BenchFlagTable()}) {
    ASSERT_NE(table.Find("--max-step-ms"), nullptr);
    EXPECT_EQ(table.Find("--max-step-ms")->default_text, "0");
    EXPECT_EQ(table.Find("--max-step-decodes")->default_text, "0");
  }
}

}  // namespace
}  // namespace kvserve
