// Running a model on a reference case (support/reference.h): the teacher-forced sequence and its
// reference logits, and the logits of a token sequence in each cache mode. Shared by the family
// reference tests (arch_reference_test, gemma_reference_test, moe_reference_test).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/finish_reason.h"
#include "model/model.h"
#include "support/reference.h"
#include "tokenizer/tokenizer.h"

namespace kvserve::testing {

// Loads a model file (relative to ../shared/models) on the test backend; nullptr, with a test
// failure, when it does not load.
std::unique_ptr<Model> LoadOrDie(const std::string& model);
// The same for a path as given (a GGUF file or a Hugging Face folder).
std::unique_ptr<Model> LoadPathOrDie(const std::string& path);

// A model and its tokenizer, both loaded (null, with a test failure, where one did not load).
struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};
// A preset's F32 file made by `kvserve synth` (SynthesizedModel, named "<preset>-f32").
LoadedModel LoadSynthesizedF32(const std::string& preset);

// Row `row` of a [rows, n_vocab] logits array.
std::span<const float> Row(const std::vector<float>& all, size_t row, int n_vocab);

// prompt + greedy[:-1], and the reference's logits at each of its positions: the prompt rows,
// then gen row i (after greedy[i]).
struct TeacherForced {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [tokens.size(), n_vocab]
};
TeacherForced Sequence(const ReferenceCase& c);

enum class Mode { kBatch, kIncremental, kNoCache };
const char* ModeName(Mode m);
// Every position's logits of `tokens` on a fresh SequenceRunner (f32 KV, 2 threads): one pass
// (batch), one token at a time (incremental), or recomputing everything for each token (no-cache).
// [tokens.size(), n_vocab]
std::vector<float> Logits(const Model& model, const std::vector<int32_t>& tokens, Mode mode);

// The reference prompt through the serving engine, greedy, as many tokens as the reference's
// greedy run, past end-of-generation: one request alone, then 16 submitted together.
struct GreedyRuns {
  std::vector<int32_t> alone;
  FinishReason alone_finish = FinishReason::kNone;
  std::vector<std::vector<int32_t>> together;  // [16]
};
GreedyRuns RunGreedy(const Model& model, const ReferenceCase& c);

// The teacher-forced sequence's logits in batch, incremental and no-cache modes: every row within
// `tolerance` of the reference (RelativeRowError), and the three modes the same bits. Prints the
// worst error per mode. A row listed in `row_tolerances` is held to its own bound instead (a row
// whose computation is known to part from the reference's, e.g. a router choosing another
// expert); every row listed must exceed `tolerance`, so a listed row that stops parting fails
// and the exception is removed rather than kept.
struct RowTolerance {
  size_t row;
  double tolerance;
};
void ExpectTeacherForcedMatch(const Model& model, const ReferenceCase& c, double tolerance,
                              const std::vector<RowTolerance>& row_tolerances = {});
// The engine's greedy run alone equals the reference's tokens (when `exact_tokens`), and 16
// requests at once each equal the run alone.
void ExpectGreedyAloneAndSixteen(const Model& model, const ReferenceCase& c, bool exact_tokens);

}  // namespace kvserve::testing
