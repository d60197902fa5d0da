#include "support/reference_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>

#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "support/paths.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve::testing {

std::unique_ptr<Model> LoadOrDie(const std::string& model) {
  return LoadPathOrDie(ModelPath(model));
}

LoadedModel LoadSynthesizedF32(const std::string& preset) {
  LoadedModel l;
  l.model = LoadPathOrDie(SynthesizedModel(preset, preset + "-f32", GgmlType::kF32));
  if (l.model) {
    auto tokenizer = Tokenizer::FromGguf(l.model->file());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
    if (tokenizer.ok()) l.tokenizer = std::move(tokenizer).value();
  }
  return l;
}

std::unique_ptr<Model> LoadPathOrDie(const std::string& path) {
  auto loaded = LoadModel(path, TestBackend());
  EXPECT_TRUE(loaded.ok()) << path << ": " << loaded.message();
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

std::span<const float> Row(const std::vector<float>& all, size_t row, int n_vocab) {
  return std::span<const float>(all.data() + row * n_vocab, n_vocab);
}

TeacherForced Sequence(const ReferenceCase& c) {
  TeacherForced t;
  t.tokens = c.prompt_tokens;
  t.tokens.insert(t.tokens.end(), c.greedy_tokens.begin(), c.greedy_tokens.end() - 1);
  t.logits = c.prompt_logits;
  t.logits.insert(t.logits.end(), c.gen_logits.begin(),
                  c.gen_logits.begin() + (c.greedy_tokens.size() - 1) * c.n_vocab);
  return t;
}

const char* ModeName(Mode m) {
  return m == Mode::kBatch ? "batch" : m == Mode::kIncremental ? "incremental" : "no-cache";
}

std::vector<float> Logits(const Model& model, const std::vector<int32_t>& tokens, Mode mode) {
  SequenceRunner runner(model, KvType::kF32, model.config().n_ctx_train, 2);
  std::vector<float> out;
  if (mode == Mode::kBatch) {
    auto logits = runner.Append(tokens, true);
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (logits.ok()) out.assign(logits->begin(), logits->end());
    return out;
  }
  for (int32_t token : tokens) {
    auto logits = mode == Mode::kIncremental ? runner.Append(std::span(&token, 1))
                                             : runner.AppendRecompute(std::span(&token, 1));
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (logits.ok()) out.insert(out.end(), logits->begin(), logits->end());
  }
  return out;
}

namespace {

// A request's tokens and finish reason, read to its end.
std::pair<std::vector<int32_t>, FinishReason> Collect(RequestStream& stream) {
  std::vector<int32_t> tokens;
  for (;;) {
    auto event = stream.Next(std::chrono::seconds(60));
    EXPECT_TRUE(event.has_value()) << "no event within 60 s";
    if (!event) return {tokens, FinishReason::kNone};
    if (event->kind == RequestEvent::Kind::kFinish) return {tokens, event->finish_reason};
    tokens.push_back(event->token);
  }
}

}  // namespace

GreedyRuns RunGreedy(const Model& model, const ReferenceCase& c) {
  GreedyRuns runs;
  auto tokenizer = Tokenizer::FromGguf(model.file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (!tokenizer.ok()) return runs;
  Request request;
  request.prompt = c.prompt_tokens;
  request.max_tokens = static_cast<int>(c.greedy_tokens.size());
  request.ignore_eos = true;
  request.sampling.temperature = 0.0f;
  auto engine =
      Engine::Create(model, **tokenizer, {.n_threads = 2, .n_ctx = 64, .max_batched_tokens = 64});
  EXPECT_TRUE(engine.ok()) << engine.message();
  if (!engine.ok()) return runs;
  auto first = (*engine)->Submit(request);
  EXPECT_TRUE(first.ok()) << first.message();
  if (!first.ok()) return runs;
  std::tie(runs.alone, runs.alone_finish) = Collect(**first);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 16; ++i) {
    auto stream = (*engine)->Submit(request);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (stream.ok()) streams.push_back(*stream);
  }
  for (const auto& stream : streams) runs.together.push_back(Collect(*stream).first);
  return runs;
}

void ExpectTeacherForcedMatch(const Model& model, const ReferenceCase& c, double tolerance,
                              const std::vector<RowTolerance>& row_tolerances) {
  ASSERT_EQ(model.config().n_vocab, c.n_vocab);
  const TeacherForced seq = Sequence(c);
  const std::vector<float> batch = Logits(model, seq.tokens, Mode::kBatch);
  for (Mode mode : {Mode::kBatch, Mode::kIncremental, Mode::kNoCache}) {
    const std::vector<float> ours = mode == Mode::kBatch ? batch : Logits(model, seq.tokens, mode);
    ASSERT_EQ(ours.size(), seq.logits.size());
    double worst = 0.0;
    for (size_t i = 0; i < seq.tokens.size(); ++i) {
      const double error = RelativeRowError(Row(ours, i, c.n_vocab), Row(seq.logits, i, c.n_vocab));
      auto listed = std::find_if(row_tolerances.begin(), row_tolerances.end(),
                                 [&](const RowTolerance& r) { return r.row == i; });
      if (listed != row_tolerances.end()) {
        EXPECT_GT(error, tolerance) << "row " << i << " mode " << ModeName(mode)
                                    << " is listed as parting from the reference but does not";
        EXPECT_LE(error, listed->tolerance) << "row " << i << " mode " << ModeName(mode);
        continue;
      }
      worst = std::max(worst, error);
      EXPECT_LE(error, tolerance) << "row " << i << " mode " << ModeName(mode);
    }
    std::printf("%s %s: max relative error %.2e over %zu rows (%zu listed apart)\n", c.name.c_str(),
                ModeName(mode), worst, seq.tokens.size() - row_tolerances.size(),
                row_tolerances.size());
    EXPECT_TRUE(ours == batch) << ModeName(mode) << " differs from batch";
  }
}

void ExpectGreedyAloneAndSixteen(const Model& model, const ReferenceCase& c, bool exact_tokens) {
  const GreedyRuns runs = RunGreedy(model, c);
  if (exact_tokens) {
    EXPECT_EQ(runs.alone, c.greedy_tokens) << "alone";
  }
  ASSERT_EQ(runs.together.size(), 16u);
  for (size_t i = 0; i < runs.together.size(); ++i) {
    EXPECT_EQ(runs.together[i], runs.alone) << "request " << i << " of 16";
  }
}

}  // namespace kvserve::testing
