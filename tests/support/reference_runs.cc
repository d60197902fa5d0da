#include "support/reference_runs.h"

#include <gtest/gtest.h>

#include "engine/sequence_runner.h"
#include "support/paths.h"
#include "support/test_backend.h"

namespace kvserve::testing {

std::unique_ptr<Model> LoadOrDie(const std::string& model) {
  auto loaded = LoadModel(ModelPath(model), TestBackend());
  EXPECT_TRUE(loaded.ok()) << loaded.message();
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

}  // namespace kvserve::testing
