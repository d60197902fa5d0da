// The gemma4 architecture (src/model/arch/gemma4.cc) against llama.cpp: `kvserve synth --preset
// gemma4-tiny` files (layers S S G S S G with a window of 8, windowed heads of 64 and global heads
// of 128 with rope_freqs, q/k norms and v's unweighted norm, per-layer inputs of 32, output
// scales, final soft-cap 30, the last three layers reading layers 1, 1 and 2's caches with
// double-wide feed-forwards: feed_forward_length per layer) made
// again here, checked byte for byte against the files llama.cpp read, with their logits against
// llama.cpp's (tests/data/llama-reference) in batch, incremental and no-cache modes; greedy
// through the engine alone and 16 at once; the cache spec (only the layers with a cache, the
// readers named) and what a reader's missing cache would cost; and gemma4-moe-tiny, the mixture
// of experts' layout (26B-A4B).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "kv/kv_format.h"
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

struct SynthCase {
  const char* name;
  GgmlType type;
  const char* sha256;  // of the file llama.cpp read (tests/data/llama-reference/README.md)
  // F32: GGML's f16-table GELU makes summation order visible: llama.cpp's own batch and
  // incremental passes differ by 3.8e-4 on this file, kvserve by 5.0e-4 from them; 1e-3 (the
  // shared README says 5e-4 for its two-layer gemma files). Q8_0: rows 0-10 agree within 1.8e-7;
  // at position 11 one 8-bit activation rounds the other way (its sum done in another order),
  // and the K/V it leaves moves every later row by 1.5e-2 to 8.9e-2 (six layers, three of them
  // reading that K/V again), above the README's 5e-2 for two-layer files.
  double tolerance;
  const char* preset = "gemma4-tiny";
};

const SynthCase kCases[] = {
    {"gemma4-tiny-f32", GgmlType::kF32,
     "b2c3d47634f0e8f3e72e1e1debcdbfbe5def900ed857e2bddb3e6c0d9f15abc5", 1e-3},
    {"gemma4-tiny-q8_0", GgmlType::kQ8_0,
     "c792bef3b5e60ab384756ccb1a6f1d28b39b296e1eff687161f9a16a72ccb448", 1e-1},
    // 26B-A4B's layout (experts beside the dense MLP, the router on RMSNorm(x) / sqrt(n_embd) times
    // its scale, fused gate/up experts): 1.4e-4.
    {"gemma4-moe-tiny-f32", GgmlType::kF32,
     "b49d48e130a4e6c3afc9751235f67be8da98d6158f7d19d36a0cfd7c75df6cf5", 1e-3, "gemma4-moe-tiny"},
};

std::string Synthesize(const SynthCase& c) {
  return testing::SynthesizedModel(c.preset, c.name, c.type);
}

class Gemma4ReferenceTest : public ::testing::TestWithParam<SynthCase> {};

TEST_P(Gemma4ReferenceTest, FileIsTheOneLlamaCppRead) {
  const std::string path = Synthesize(GetParam());
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(testing::FileSha256(path), GetParam().sha256)
      << "kvserve synth writes another file than the references were made from; remake them "
         "(tests/data/llama-reference/README.md)";
}

TEST_P(Gemma4ReferenceTest, TeacherForcedLogitsMatchLlamaCppInEveryMode) {
  const SynthCase& sc = GetParam();
  const testing::ReferenceCase c = testing::LoadCommittedReferenceCase(sc.name, Synthesize(sc));
  auto model = testing::LoadPathOrDie(c.model);
  ASSERT_NE(model, nullptr);
  testing::ExpectTeacherForcedMatch(*model, c, sc.tolerance);
}

// The F32 references' smallest top-2 gaps (9.3e-4 and 1.1e-3 of the row) are about the GELU
// table's noise, so
// greedy tokens are judged teacher-forced above; 16 at once must equal alone.
TEST_P(Gemma4ReferenceTest, EngineGreedySixteenAtOnceEqualAlone) {
  const SynthCase& sc = GetParam();
  const testing::ReferenceCase c = testing::LoadCommittedReferenceCase(sc.name, Synthesize(sc));
  auto model = testing::LoadPathOrDie(c.model);
  ASSERT_NE(model, nullptr);
  testing::ExpectGreedyAloneAndSixteen(*model, c, /*exact_tokens=*/false);
}

INSTANTIATE_TEST_SUITE_P(Cases, Gemma4ReferenceTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Layers 0-2 have caches (two windowed with heads of 64, one global of 128); 3 and 4 read layer
// 1's, 5 reads layer 2's. Memory per token counts the three alone: half of all six.
TEST(Gemma4Cache, SharedLayersHaveNoBlocksOfTheirOwn) {
  auto model = testing::LoadPathOrDie(Synthesize(kCases[0]));
  ASSERT_NE(model, nullptr);
  const KvSpec spec = model->kv_spec();
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[0].layers, std::vector<int>{2});
  EXPECT_EQ(spec.groups[0].head_dim, 128);
  EXPECT_EQ(spec.groups[0].kind->attention_window(), 0);
  EXPECT_EQ(spec.groups[1].layers, (std::vector<int>{0, 1}));
  EXPECT_EQ(spec.groups[1].head_dim, 64);
  EXPECT_EQ(spec.groups[1].kind->attention_window(), 8);
  EXPECT_EQ(spec.readers, (std::vector<std::pair<int, int>>{{3, 1}, {4, 1}, {5, 2}}));
  // f32: 2 (K, V) x 2 heads x (64 + 64 + 128) x 4 bytes.
  EXPECT_EQ(spec.BytesPerToken(KvFormat(KvType::kF32)), 2u * 2 * (64 + 64 + 128) * 4);
}

TEST(Gemma4Metadata, KeysAreCheckedByName) {
  struct Case {
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](GgufWriter& w) { w.SetUint32("gemma4.attention.shared_kv_layers", 4); },
       "shared_kv_layers 4 of 6 layers (the last two layers with a cache must be sliding-window, "
       "then global)"},
      {[](GgufWriter& w) {
         w.SetBoolArray("gemma4.attention.sliding_window_pattern", {true, true, false});
       },
       "'gemma4.attention.sliding_window_pattern' has 3 entries, expected 6"},
      {[](GgufWriter& w) {
         w.SetInt32Array("gemma4.feed_forward_length", {256, 256, 512});
       },
       "'gemma4.feed_forward_length' has 3 entries, expected 6 (one per layer)"},
      {[](GgufWriter& w) {
         w.SetInt32Array("gemma4.feed_forward_length", {256, 256, 256, 256, 512, 512});
       },
       "tensor 'blk.3.ffn_gate.weight' has shape [256, 512], expected [256, 256]"},
      {[](GgufWriter& w) { w.SetUint32("gemma4.attention.key_length_swa", 32); },
       "key_length_swa 32 (value_length_swa 64)"},
      {[](GgufWriter& w) {
         w.SetUint32("gemma4.attention.key_length_swa", 32);
         w.SetUint32("gemma4.attention.value_length_swa", 32);
         w.SetUint32("gemma4.rope.dimension_count_swa", 32);
       },
       "tensor 'blk.0.attn_q_norm.weight' has shape [64], expected [32]"},
  };
  const std::string path = Synthesize(kCases[0]);
  for (const Case& c : cases) {
    testing::EditedModel e = testing::LoadEditedModel(path, "", c.edit);
    ASSERT_FALSE(e.model.ok()) << "loaded; expected: " << c.expected;
    EXPECT_NE(e.model.message().find(c.expected), std::string::npos) << e.model.message();
  }
}

// The mixture's keys are checked against its tensors, naming the key or the tensor.
TEST(Gemma4Metadata, ExpertKeysAreCheckedByName) {
  const std::string path = Synthesize(kCases[2]);
  struct Case {
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](GgufWriter& w) { w.SetUint32("gemma4.expert_used_count", 5); },
       "'gemma4.expert_used_count' = 5 is out of range (1 to expert_count 4)"},
      {[](GgufWriter& w) { w.SetUint32("gemma4.expert_feed_forward_length", 64); },
       "tensor 'blk.0.ffn_gate_up_exps.weight' has shape [256, 256, 4], expected [256, 128, 4]"},
  };
  for (const Case& c : cases) {
    testing::EditedModel e = testing::LoadEditedModel(path, "", c.edit);
    ASSERT_FALSE(e.model.ok()) << "loaded; expected: " << c.expected;
    EXPECT_NE(e.model.message().find(c.expected), std::string::npos) << e.model.message();
  }
}

}  // namespace
}  // namespace kvserve
