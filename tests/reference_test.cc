// Our logits and greedy tokens against llama.cpp's (../shared/reference), in every mode, and the
// cache contract: prefill, incremental decode and no-cache recompute give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "engine/sequence_runner.h"
#include "model/model.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using testing::LoadReferenceCase;
using testing::ModelPath;
using testing::ReferenceCase;
using testing::RelativeRowError;

// f32 weights, f32 KV: llama.cpp and we differ only in summation order, ~1e-6 of the row scale.
// GPT-2's GELU rounds its input and output to f16 (as GGML does, see kernels/ops.h); an input that
// sits on an f16 rounding boundary can flip by one f16 step (2^-11 relative) between the two
// engines, which moves a row by about 1e-4 of its scale (measured: 1.02e-4 on gpt2-tiny-a row 7,
// 2e-6 elsewhere). So gpt2 rows get 2e-4; llama rows 1e-5.
double Tolerance(const ReferenceCase& c) { return c.model == "stories260K.gguf" ? 1e-5 : 2e-4; }

std::unique_ptr<Model> LoadOrDie(const std::string& model) {
  auto loaded = LoadModel(ModelPath(model), TestBackend());
  EXPECT_TRUE(loaded.ok()) << loaded.message();
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

std::span<const float> Row(const std::vector<float>& all, size_t row, int n_vocab) {
  return std::span<const float>(all.data() + row * n_vocab, n_vocab);
}

enum class Mode { kBatch, kIncremental, kNoCache };

std::vector<float> PromptLogits(const Model& model, const std::vector<int32_t>& tokens, Mode mode,
                                int n_threads, KvType kv_type = KvType::kF32) {
  SequenceRunner runner(model, kv_type, model.config().n_ctx_train, n_threads);
  std::vector<float> out;
  if (mode == Mode::kBatch) {
    auto logits = runner.Append(tokens, true);
    EXPECT_TRUE(logits.ok()) << logits.message();
    out.assign(logits->begin(), logits->end());
    return out;
  }
  for (int32_t token : tokens) {
    auto logits = mode == Mode::kIncremental ? runner.Append(std::span(&token, 1))
                                             : runner.AppendRecompute(std::span(&token, 1));
    EXPECT_TRUE(logits.ok()) << logits.message();
    out.insert(out.end(), logits->begin(), logits->end());
  }
  return out;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, PromptLogitsMatchLlamaCppInEveryMode) {
  const ReferenceCase c = LoadReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->config().n_vocab, c.n_vocab);
  const std::vector<float> batch = PromptLogits(*model, c.prompt_tokens, Mode::kBatch, 2);
  for (Mode mode : {Mode::kBatch, Mode::kIncremental, Mode::kNoCache}) {
    const std::vector<float> ours =
        mode == Mode::kBatch ? batch : PromptLogits(*model, c.prompt_tokens, mode, 2);
    ASSERT_EQ(ours.size(), c.prompt_logits.size());
    for (size_t i = 0; i < c.prompt_tokens.size(); ++i) {
      EXPECT_LE(RelativeRowError(Row(ours, i, c.n_vocab), Row(c.prompt_logits, i, c.n_vocab)),
                Tolerance(c))
          << "row " << i << " mode " << static_cast<int>(mode);
    }
    // The cache contract: every mode adds the same numbers in the same order.
    EXPECT_TRUE(ours == batch) << "mode " << static_cast<int>(mode) << " differs from batch";
  }
}

TEST_P(ReferenceTest, GreedyGenerationMatchesWithAndWithoutCache) {
  const ReferenceCase c = LoadReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  SequenceRunner cached(*model, KvType::kF32, model->config().n_ctx_train, 2);
  SequenceRunner uncached(*model, KvType::kF32, model->config().n_ctx_train, 2);
  auto logits = cached.Append(c.prompt_tokens);
  ASSERT_TRUE(logits.ok()) << logits.message();
  std::vector<float> last(logits->begin(), logits->end());
  {
    auto prompt = uncached.AppendRecompute(c.prompt_tokens);
    ASSERT_TRUE(prompt.ok());
    ASSERT_TRUE(std::equal(prompt->begin(), prompt->end(), last.begin()));
  }
  for (size_t step = 0; step < c.greedy_tokens.size(); ++step) {
    const int32_t ours =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    ASSERT_EQ(ours, c.greedy_tokens[step]) << "step " << step;
    const int32_t token = c.greedy_tokens[step];
    auto next = cached.Append(std::span(&token, 1));
    auto recomputed = uncached.AppendRecompute(std::span(&token, 1));
    ASSERT_TRUE(next.ok() && recomputed.ok());
    ASSERT_TRUE(std::equal(next->begin(), next->end(), recomputed->begin()))
        << "cached and recomputed logits differ at step " << step;
    last.assign(next->begin(), next->end());
    EXPECT_LE(RelativeRowError(last, Row(c.gen_logits, step, c.n_vocab)), Tolerance(c))
        << "generated row " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceTest, ::testing::ValuesIn(testing::ReferenceCaseNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(CacheContract, ThreadCountDoesNotChangeBits) {
  const ReferenceCase c = LoadReferenceCase("gpt2-tiny-b");
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(PromptLogits(*model, c.prompt_tokens, Mode::kBatch, 1) ==
              PromptLogits(*model, c.prompt_tokens, Mode::kBatch, 3));
}

TEST(CacheContract, HalfPrecisionKvAgreesBetweenCachedAndRecompute) {
  for (const char* name : {"gpt2-tiny-b", "stories260K-a"}) {
    const ReferenceCase c = LoadReferenceCase(name);
    auto model = LoadOrDie(c.model);
    ASSERT_NE(model, nullptr);
    for (KvType type : {KvType::kF16, KvType::kBF16}) {
      const auto batch = PromptLogits(*model, c.prompt_tokens, Mode::kBatch, 2, type);
      EXPECT_TRUE(batch == PromptLogits(*model, c.prompt_tokens, Mode::kIncremental, 2, type))
          << name << " " << KvTypeName(type);
      EXPECT_TRUE(batch == PromptLogits(*model, c.prompt_tokens, Mode::kNoCache, 2, type))
          << name << " " << KvTypeName(type);
      // Rounding K/V to 16 bits moves logits a little, not a lot.
      const auto f32 = PromptLogits(*model, c.prompt_tokens, Mode::kBatch, 2, KvType::kF32);
      for (size_t i = 0; i < c.prompt_tokens.size(); ++i) {
        EXPECT_LE(RelativeRowError(Row(batch, i, c.n_vocab), Row(f32, i, c.n_vocab)), 5e-2);
      }
    }
  }
}

TEST(SequenceRunner, RefusesOverflowAndBadTokens) {
  auto model = LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  SequenceRunner runner(*model, KvType::kF32, 4, 1);
  std::vector<int32_t> five = {1, 2, 3, 4, 5};
  auto overflow = runner.Append(five);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.message().find("context full"), std::string::npos) << overflow.message();
  EXPECT_EQ(runner.n_past(), 0);
  std::vector<int32_t> bad = {1, 512};
  auto out_of_range = runner.Append(bad);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.message().find("512"), std::string::npos);
}

// The `kvserve logits` command writes the same layout as the references.
TEST(LogitsCommand, WritesReferenceLayout) {
  const ReferenceCase c = LoadReferenceCase("stories260K-a");
  std::string tokens;
  for (int32_t t : c.prompt_tokens) tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
  for (const char* mode : {"batch", "incremental", "no-cache"}) {
    const std::string out = testing::TempDir() + "/logits-" + mode + ".f32";
    const std::string command = testing::KvserveBinary() + " logits -m " + ModelPath(c.model) +
                                " --tokens " + tokens + " --out " + out + " --mode " + mode;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::vector<float> ours = testing::ReadFloats(out);
    ASSERT_EQ(ours.size(), c.prompt_logits.size());
    for (size_t i = 0; i < c.prompt_tokens.size(); ++i) {
      EXPECT_LE(RelativeRowError(Row(ours, i, c.n_vocab), Row(c.prompt_logits, i, c.n_vocab)),
                Tolerance(c));
    }
  }
  const std::string bad = testing::KvserveBinary() + " logits -m " + ModelPath(c.model) +
                          " --tokens 1,x --out /dev/null 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

}  // namespace
}  // namespace kvserve
