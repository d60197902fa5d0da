// The model families of ../shared/models/arch (Llama 3, Qwen 2, Qwen 3, Phi-3), in F32, F16 and
// every quantized type of the references, against llama.cpp's references
// (../shared/reference/arch, see its README): logits teacher-forced on prompt +
// greedy[:-1] in batch, incremental and no-cache modes (the three bit-identical), and greedy
// generation through the serving engine, alone and 16 requests at once. Also the RoPE scaling keys
// kvserve refuses, and linear scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "support/edited_model.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/reference_runs.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::GreedyRuns;
using testing::LoadArchReferenceCase;
using testing::LoadOrDie;
using testing::Logits;
using testing::Mode;
using testing::ModelPath;
using testing::ModeName;
using testing::ReferenceCase;
using testing::RelativeRowError;
using testing::Row;
using testing::RunGreedy;
using testing::Sequence;
using testing::TeacherForced;

// The README's tolerances, relative to each row's max |ref|: F32 files differ from llama.cpp only
// in summation order (its `exact` column: ~1.3e-6); F16 files also in where llama.cpp rounds the
// activations to f16 before each product (`exact`: up to 1.7e-3); quantized files round their
// activations to 8 bits as llama.cpp does, so they agree to ~1e-6 until one rounding step lands on
// the other side, and within 5e-2 after it.
bool IsFloat(const std::string& name) { return name.ends_with("-f32") || name.ends_with("-f16"); }
double Tolerance(const std::string& name) {
  if (name.ends_with("-f16")) return 3e-3;
  return IsFloat(name) ? 1e-4 : 5e-2;
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> names = {"llama3-f32", "qwen2-f32", "qwen3-f32",    "qwen3-f16",
                                    "phi3-f32",   "phi3-f16",  "qwen3-q4_k_m", "phi3-q4_k_m"};
  // Every GGML weight type, on the two families the references quantize to all of them.
  for (const char* arch : {"llama3", "qwen2"}) {
    for (const char* type :
         {"q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
      names.push_back(std::string(arch) + "-" + type);
    }
  }
  return names;
}

// The reference row whose argmax is greedy token i: the last prompt row, then gen row i - 1.
std::span<const float> GreedyRow(const ReferenceCase& c, size_t i) {
  return i == 0 ? Row(c.prompt_logits, c.prompt_tokens.size() - 1, c.n_vocab)
                : Row(c.gen_logits, i - 1, c.n_vocab);
}

// The README's rule for a quantized file's greedy token that differs from llama.cpp's: it is
// rounding when the reference row's top-2 gap is below twice the logit difference measured on
// that (teacher-forced) row, otherwise a bug.
bool IsRoundingTie(std::span<const float> ours, std::span<const float> ref) {
  float top1 = -INFINITY, top2 = -INFINITY, diff = 0.0f;
  for (size_t v = 0; v < ref.size(); ++v) {
    diff = std::max(diff, std::fabs(ours[v] - ref[v]));
    if (ref[v] > top1) {
      top2 = top1;
      top1 = ref[v];
    } else if (ref[v] > top2) {
      top2 = ref[v];
    }
  }
  return top1 - top2 < 2.0f * diff;
}

class ArchReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchReferenceTest, TeacherForcedLogitsMatchLlamaCppInEveryMode) {
  const ReferenceCase c = LoadArchReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->config().n_vocab, c.n_vocab);
  const TeacherForced t = Sequence(c);
  const std::vector<float> batch = Logits(*model, t.tokens, Mode::kBatch);
  for (Mode mode : {Mode::kBatch, Mode::kIncremental, Mode::kNoCache}) {
    const std::vector<float> ours = mode == Mode::kBatch ? batch : Logits(*model, t.tokens, mode);
    ASSERT_EQ(ours.size(), t.logits.size());
    double worst = 0.0;
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const double error = RelativeRowError(Row(ours, i, c.n_vocab), Row(t.logits, i, c.n_vocab));
      worst = std::max(worst, error);
      EXPECT_LE(error, Tolerance(c.name)) << "row " << i << " mode " << ModeName(mode);
    }
    std::printf("%s %s: max relative error %.2e over %zu rows\n", c.name.c_str(), ModeName(mode),
                worst, t.tokens.size());
    // The cache contract: every mode adds the same numbers in the same order.
    EXPECT_TRUE(ours == batch) << ModeName(mode) << " differs from batch";
  }
}

TEST_P(ArchReferenceTest, EngineGreedyMatchesAloneAndSixteenAtOnce) {
  const ReferenceCase c = LoadArchReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  const GreedyRuns runs = RunGreedy(*model, c);
  const std::vector<int32_t>& alone = runs.alone;
  EXPECT_EQ(runs.alone_finish, FinishReason::kLength);
  ASSERT_EQ(alone.size(), c.greedy_tokens.size());
  const auto mismatch = std::mismatch(alone.begin(), alone.end(), c.greedy_tokens.begin());
  if (IsFloat(c.name) || mismatch.first == alone.end()) {
    EXPECT_EQ(alone, c.greedy_tokens) << "alone";
  } else {
    // Past a differing step the two sequences diverge: judge that step only, teacher-forced.
    const size_t step = mismatch.first - alone.begin();
    const TeacherForced t = Sequence(c);
    const std::vector<float> ours = Logits(*model, t.tokens, Mode::kBatch);
    const size_t row = c.prompt_tokens.size() - 1 + step;
    EXPECT_TRUE(IsRoundingTie(Row(ours, row, c.n_vocab), GreedyRow(c, step)))
        << "greedy token " << step << " differs (" << *mismatch.first << " vs " << *mismatch.second
        << ") and the reference row is no rounding tie";
  }
  ASSERT_EQ(runs.together.size(), 16u);
  for (size_t i = 0; i < runs.together.size(); ++i) {
    EXPECT_EQ(runs.together[i], alone) << "request " << i << " of 16";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ArchReferenceTest, ::testing::ValuesIn(CaseNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---- Metadata ------------------------------------------------------------------------------

using Edited = testing::EditedModel;

// A copy of models/<model>, without `drop_tensor`, with `extra` applied after the copied metadata.
Edited LoadEdited(const std::string& model, const std::string& drop_tensor,
                  const std::function<void(GgufWriter&)>& extra) {
  return testing::LoadEditedModel(ModelPath(model), drop_tensor, extra);
}

TEST(RopeScaling, UnsupportedKeysAreRefusedByName) {
  struct Case {
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](GgufWriter& w) { w.SetString("llama.rope.scaling.type", "yarn"); },
       "edited.gguf: RoPE scaling 'llama.rope.scaling.type' = 'yarn' is not supported"},
      {[](GgufWriter& w) { w.SetString("llama.rope.scaling.type", "longrope"); },
       "'llama.rope.scaling.type' = 'longrope' is not supported"},
      {[](GgufWriter& w) { w.SetFloat32("llama.rope.scaling.yarn_beta_fast", 32.0f); },
       "'llama.rope.scaling.yarn_beta_fast' = 32.000000 is not supported"},
      {[](GgufWriter& w) { w.SetFloat32("llama.rope.scaling.attn_factor", 0.5f); },
       "'llama.rope.scaling.attn_factor' = 0.500000 is not supported"},
      {[](GgufWriter& w) {
         w.SetString("llama.rope.scaling.type", "linear");
         w.SetFloat32("llama.rope.scaling.factor", -2.0f);
       },
       "'llama.rope.scaling.factor' = -2.000000 must be positive"},
      {[](GgufWriter& w) {
         w.SetString("llama.rope.scaling.type", "none");
         w.SetFloat32("llama.rope.scaling.factor", 8.0f);
       },
       "'llama.rope.scaling.factor' = 8.000000 contradicts 'llama.rope.scaling.type' = 'none'"},
  };
  for (const Case& c : cases) {
    Edited e = LoadEdited("arch/llama3-f32.gguf", "", c.edit);
    ASSERT_FALSE(e.model.ok()) << "loaded; expected: " << c.expected;
    EXPECT_NE(e.model.message().find(c.expected), std::string::npos) << e.model.message();
  }
  // What is harmless without a YaRN type loads (phi3 files carry original_context_length).
  Edited ok = LoadEdited("arch/llama3-f32.gguf", "", [](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "none");
    w.SetUint32("llama.rope.scaling.original_context_length", 256);
  });
  EXPECT_TRUE(ok.model.ok()) << ok.model.message();
}

// Linear scaling by 4 divides every pair's angle by 4, as rope_freqs of 4 everywhere does; with a
// power of two both are exact, so the logits are the same bits. The older rope.scale_linear key
// means the same; and the factor does change the logits.
TEST(RopeScaling, LinearFactorDividesPositions) {
  const std::vector<int32_t> tokens = {1, 307, 83, 450, 262, 119, 498, 37, 221};
  Edited linear = LoadEdited("arch/llama3-f32.gguf", "rope_freqs.weight", [](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetFloat32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(linear.model.ok()) << linear.model.message();
  const int n_pairs = (*linear.model)->config().rope_dims / 2;
  Edited divisors = LoadEdited("arch/llama3-f32.gguf", "rope_freqs.weight", [&](GgufWriter& w) {
    const std::vector<float> fours(n_pairs, 4.0f);
    std::vector<uint8_t> bytes(fours.size() * sizeof(float));
    std::memcpy(bytes.data(), fours.data(), bytes.size());
    w.AddTensor("rope_freqs.weight", GgmlType::kF32, {n_pairs}, bytes);
  });
  ASSERT_TRUE(divisors.model.ok()) << divisors.model.message();
  Edited plain = LoadEdited("arch/llama3-f32.gguf", "rope_freqs.weight", nullptr);
  ASSERT_TRUE(plain.model.ok()) << plain.model.message();
  Edited old_key = LoadEdited("arch/llama3-f32.gguf", "rope_freqs.weight",
                              [](GgufWriter& w) { w.SetFloat32("llama.rope.scale_linear", 4.0f); });
  ASSERT_TRUE(old_key.model.ok()) << old_key.model.message();
  const std::vector<float> scaled = Logits(**linear.model, tokens, Mode::kBatch);
  EXPECT_TRUE(scaled == Logits(**divisors.model, tokens, Mode::kBatch));
  EXPECT_TRUE(scaled == Logits(**old_key.model, tokens, Mode::kBatch));
  EXPECT_FALSE(scaled == Logits(**plain.model, tokens, Mode::kBatch));
}

// attention.key_length sets head_dim even where n_embd / n_heads would not (here 3 heads of 64 in a
// 256-wide model): the q projection must then have 3 * 64 rows. value_length must agree.
TEST(HeadDim, KeyLengthSetsTheHeadWidth) {
  Edited three_heads = LoadEdited("arch/llama3-f32.gguf", "", [](GgufWriter& w) {
    w.SetUint32("llama.attention.head_count", 3);
    w.SetUint32("llama.attention.head_count_kv", 1);
    w.SetUint32("llama.attention.key_length", 64);
  });
  ASSERT_FALSE(three_heads.model.ok());
  EXPECT_NE(three_heads.model.message().find(
                "tensor 'blk.0.attn_q.weight' has shape [256, 256], expected [256, 192]"),
            std::string::npos)
      << three_heads.model.message();
  Edited mismatched = LoadEdited("arch/qwen3-f32.gguf", "", [](GgufWriter& w) {
    w.SetUint32("qwen3.attention.value_length", 32);
  });
  ASSERT_FALSE(mismatched.model.ok());
  EXPECT_NE(mismatched.model.message().find(
                "'qwen3.attention.value_length' = 32 differs from key_length 64"),
            std::string::npos)
      << mismatched.model.message();
}

}  // namespace
}  // namespace kvserve
