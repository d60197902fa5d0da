// The gpt-oss architecture (src/model/arch/gpt_oss.cc) against llama.cpp: `kvserve synth --preset
// gpt-oss-tiny` files (q/k/v/o biases, learned sinks, YaRN by 32 over 4096 positions, a window of 8
// on layer 0, 64-wide heads whose q is wider than the residual, 4 experts with biases and the
// clamped SwiGLU) are made again here, checked byte for byte against the files llama.cpp read
// (sha256), and their logits compared with llama.cpp's, committed in tests/data/llama-reference
// (its README), teacher-forced in batch, incremental and no-cache modes (the three bit-identical);
// greedy generation through the engine alone and 16 at once; the cache layout (one window group,
// one full group); and the loader's checks of gpt-oss's keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "kv/kv_spec.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/edited_model.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using testing::Logits;
using testing::Mode;
using testing::ModeName;
using testing::ReferenceCase;
using testing::RelativeRowError;
using testing::Row;

struct SynthCase {
  const char* name;  // the reference case and the file's name
  GgmlType type;
  std::optional<GgmlType> expert_type;
  const char* sha256;  // of the file llama.cpp read (README)
  double tolerance;    // the shared references' README: F32 1e-4, 8-bit activations 5e-2
};

const SynthCase kCases[] = {
    {"gpt-oss-tiny-f32", GgmlType::kF32, std::nullopt,
     "d7a4f8b74ffad90037eb02de73c74d5737ab00ea0f43ff337f119f4d81d8c031", 1e-4},
    {"gpt-oss-tiny-q8_0", GgmlType::kQ8_0, std::nullopt,
     "a2376a42fdc921697098f0bde285d8172fa4701d542cf653e36702586c2c16aa", 5e-2},
};

std::string Synthesize(const SynthCase& c) {
  return testing::SynthesizedModel("gpt-oss-tiny", c.name, c.type, c.expert_type);
}

class GptOssReferenceTest : public ::testing::TestWithParam<SynthCase> {};

TEST_P(GptOssReferenceTest, FileIsTheOneLlamaCppRead) {
  const std::string path = Synthesize(GetParam());
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(testing::FileSha256(path), GetParam().sha256)
      << "kvserve synth writes another file than the references were made from; remake them "
         "(tests/data/llama-reference/README.md)";
}

TEST_P(GptOssReferenceTest, TeacherForcedLogitsMatchLlamaCppInEveryMode) {
  const SynthCase& sc = GetParam();
  const ReferenceCase c = testing::LoadCommittedReferenceCase(sc.name, Synthesize(sc));
  auto model = testing::LoadPathOrDie(c.model);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->config().n_vocab, c.n_vocab);
  const testing::TeacherForced seq = testing::Sequence(c);
  const std::vector<float> batch = Logits(*model, seq.tokens, Mode::kBatch);
  for (Mode mode : {Mode::kBatch, Mode::kIncremental, Mode::kNoCache}) {
    const std::vector<float> ours = mode == Mode::kBatch ? batch : Logits(*model, seq.tokens, mode);
    ASSERT_EQ(ours.size(), seq.logits.size());
    double worst = 0.0;
    for (size_t i = 0; i < seq.tokens.size(); ++i) {
      const double error = RelativeRowError(Row(ours, i, c.n_vocab), Row(seq.logits, i, c.n_vocab));
      worst = std::max(worst, error);
      EXPECT_LE(error, sc.tolerance) << "row " << i << " mode " << ModeName(mode);
    }
    std::printf("%s %s: max relative error %.2e over %zu rows\n", sc.name, ModeName(mode), worst,
                seq.tokens.size());
    EXPECT_TRUE(ours == batch) << ModeName(mode) << " differs from batch";
  }
}

// Greedy tokens are demanded of the F32 file only (a quantized file's differing token is judged
// by its step's gap, as in the shared README); 16 at once must equal alone for every file.
TEST_P(GptOssReferenceTest, EngineGreedyMatchesAloneAndSixteenAtOnce) {
  const SynthCase& sc = GetParam();
  const ReferenceCase c = testing::LoadCommittedReferenceCase(sc.name, Synthesize(sc));
  auto model = testing::LoadPathOrDie(c.model);
  ASSERT_NE(model, nullptr);
  const testing::GreedyRuns runs = testing::RunGreedy(*model, c);
  if (sc.type == GgmlType::kF32) {
    EXPECT_EQ(runs.alone, c.greedy_tokens) << "alone";
  }
  ASSERT_EQ(runs.together.size(), 16u);
  for (size_t i = 0; i < runs.together.size(); ++i) {
    EXPECT_EQ(runs.together[i], runs.alone) << "request " << i << " of 16";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GptOssReferenceTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Layer 0 keeps a window of 8 keys, layer 1 everything: two groups, and the windowed one holds at
// most the window's blocks.
TEST(GptOssCache, WindowedAndFullLayersAreTwoGroups) {
  auto model = testing::LoadPathOrDie(Synthesize(kCases[0]));
  ASSERT_NE(model, nullptr);
  const KvSpec spec = model->kv_spec();
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[0].layers, std::vector<int>{1});
  EXPECT_EQ(spec.groups[1].layers, std::vector<int>{0});
  EXPECT_EQ(spec.groups[1].kind->attention_window(), 8);
  EXPECT_EQ(spec.groups[0].head_dim, 64);
  EXPECT_EQ(spec.groups[0].n_kv_heads, 2);
}

TEST(GptOssMetadata, KeysAreCheckedByName) {
  struct Case {
    std::string drop_tensor;
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", [](GgufWriter& w) { w.SetUint32("gpt-oss.attention.sliding_window", 0); },
       "edited.gguf: metadata key 'gpt-oss.attention.sliding_window' = 0 is out of range"},
      {"", [](GgufWriter& w) { w.SetUint32("gpt-oss.attention.sliding_window_pattern", 0); },
       "'gpt-oss.attention.sliding_window_pattern' = 0 is out of range (1 to 4096)"},
      {"", [](GgufWriter& w) { w.SetFloat32("gpt-oss.rope.scaling.yarn_beta_fast", 16.0f); },
       "RoPE scaling 'gpt-oss.rope.scaling.yarn_beta_fast' = 16.000000 is not supported"},
      {"", [](GgufWriter& w) { w.SetUint32("gpt-oss.rope.scaling.original_context_length", 0); },
       "'gpt-oss.rope.scaling.original_context_length' = 0 is out of range"},
      {"blk.1.attn_sinks.weight", nullptr, "tensor 'blk.1.attn_sinks.weight'"},
      {"blk.0.ffn_up_exps.bias", nullptr, "tensor 'blk.0.ffn_up_exps.bias'"},
      {"", [](GgufWriter& w) { w.SetUint32("gpt-oss.expert_feed_forward_length", 128); },
       "tensor 'blk.0.ffn_gate_exps.weight' has shape [256, 256, 4], expected [256, 128, 4]"},
  };
  const std::string path = Synthesize(kCases[0]);
  ASSERT_FALSE(path.empty());
  for (const Case& c : cases) {
    testing::EditedModel e = testing::LoadEditedModel(path, c.drop_tensor, c.edit);
    ASSERT_FALSE(e.model.ok()) << "loaded; expected: " << c.expected;
    EXPECT_NE(e.model.message().find(c.expected), std::string::npos) << e.model.message();
  }
}

// The window pattern is read from the file: with pattern 1 no layer is windowed (i % 1 < 0 never
// holds), and the logits change.
TEST(GptOssMetadata, WindowPatternComesFromTheFile) {
  const std::string path = Synthesize(kCases[0]);
  ASSERT_FALSE(path.empty());
  testing::EditedModel global = testing::LoadEditedModel(
      path, "", [](GgufWriter& w) { w.SetUint32("gpt-oss.attention.sliding_window_pattern", 1); });
  ASSERT_TRUE(global.model.ok()) << global.model.message();
  EXPECT_EQ((*global.model)->kv_spec().groups.size(), 1u);
  auto windowed = testing::LoadPathOrDie(path);
  ASSERT_NE(windowed, nullptr);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 5) % 512);
  EXPECT_FALSE(Logits(**global.model, tokens, Mode::kBatch) ==
               Logits(*windowed, tokens, Mode::kBatch));
}

}  // namespace
}  // namespace kvserve
