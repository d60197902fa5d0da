// The qwen3moe architecture (mixture of experts) against llama.cpp's references in
// ../shared/reference/arch (see its README): logits teacher-forced on prompt + greedy[:-1] in
// batch, incremental and no-cache modes (the three bit-identical), greedy generation through the
// engine alone and 16 requests at once; the routing (top-k, ties, renormalisation) on hand-made
// router logits; and the expert keys' range checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "model/synthetic_model.h"
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

// The README's tolerances: F32 differs from llama.cpp in summation order only (`exact`: 1.4e-6);
// K-quant files also in how the activations are rounded before each product.
double Tolerance(const std::string& name) { return name.ends_with("-f32") ? 1e-4 : 5e-2; }

class MoeReferenceTest : public ::testing::TestWithParam<std::string> {};

// prompt + greedy[:-1] against the prompt rows, then gen row i (after greedy[i]).
TEST_P(MoeReferenceTest, TeacherForcedLogitsMatchLlamaCppInEveryMode) {
  const ReferenceCase c = LoadArchReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->config().n_vocab, c.n_vocab);
  std::vector<int32_t> tokens = c.prompt_tokens;
  tokens.insert(tokens.end(), c.greedy_tokens.begin(), c.greedy_tokens.end() - 1);
  std::vector<float> ref = c.prompt_logits;
  ref.insert(ref.end(), c.gen_logits.begin(),
             c.gen_logits.begin() + (c.greedy_tokens.size() - 1) * c.n_vocab);
  const std::vector<float> batch = Logits(*model, tokens, Mode::kBatch);
  for (Mode mode : {Mode::kBatch, Mode::kIncremental, Mode::kNoCache}) {
    const std::vector<float> ours = mode == Mode::kBatch ? batch : Logits(*model, tokens, mode);
    ASSERT_EQ(ours.size(), ref.size());
    double worst = 0.0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const double error = RelativeRowError(Row(ours, i, c.n_vocab), Row(ref, i, c.n_vocab));
      worst = std::max(worst, error);
      EXPECT_LE(error, Tolerance(c.name)) << "row " << i << " mode " << ModeName(mode);
    }
    std::printf("%s %s: max relative error %.2e over %zu rows\n", c.name.c_str(), ModeName(mode),
                worst, tokens.size());
    // A token's experts and their sums do not depend on the batch it is in.
    EXPECT_TRUE(ours == batch) << ModeName(mode) << " differs from batch";
  }
}

// Greedy tokens are only demanded of the F32 file (the README: a quantized file's differing token
// is judged by its step's gap); 16 at once must equal alone for every file.
TEST_P(MoeReferenceTest, EngineGreedyMatchesAloneAndSixteenAtOnce) {
  const ReferenceCase c = LoadArchReferenceCase(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  const GreedyRuns runs = RunGreedy(*model, c);
  if (c.name.ends_with("-f32")) {
    EXPECT_EQ(runs.alone, c.greedy_tokens) << "alone";
  }
  ASSERT_EQ(runs.together.size(), 16u);
  for (size_t i = 0; i < runs.together.size(); ++i) {
    EXPECT_EQ(runs.together[i], runs.alone) << "request " << i << " of 16";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeReferenceTest,
                         ::testing::Values("qwen3moe-f32", "qwen3moe-q4_k_m"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---- Routing ---------------------------------------------------------------------------------

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed Route(const std::vector<float>& logits, int n_expert, int k) {
  const int n_rows = static_cast<int>(logits.size()) / n_expert;
  Routed r{std::vector<int32_t>(n_rows * k, -7), std::vector<float>(n_rows * k, -7.0f)};
  auto ws = TestBackend().NewWorkspace({.n_threads = 1});
  TestBackend().RouteTopK(logits.data(), n_rows, n_expert, k, r.ids.data(), r.weights.data(), *ws);
  return r;
}

TEST(MoeRouting, TopKByProbabilityRenormalised) {
  const Routed r = Route({0.1f, 3.0f, -1.0f, 2.0f}, 4, 2);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  // softmax over all four, then the two chosen divided by their sum = softmax over the two.
  const double w1 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(r.weights[0], w1, 1e-7);
  EXPECT_NEAR(r.weights[1], 1.0 - w1, 1e-7);
  EXPECT_GT(r.weights[0], r.weights[1]);
}

TEST(MoeRouting, TiesGoToTheLowestIndex) {
  EXPECT_EQ(Route({1.0f, 2.0f, 2.0f, 0.0f}, 4, 2).ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Route({0.0f, 0.0f, 0.0f, 0.0f}, 4, 3).ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(Route({-5.0f, 4.0f, 1.0f, 4.0f, 1.0f}, 5, 3).ids, (std::vector<int32_t>{1, 3, 2}));
  const Routed equal = Route({0.0f, 0.0f, 0.0f, 0.0f}, 4, 3);
  for (float w : equal.weights) EXPECT_FLOAT_EQ(w, 1.0f / 3.0f);
}

TEST(MoeRouting, OneExpertWeighsOneAndAllExpertsAreTheSoftmax) {
  const Routed one = Route({0.5f, -2.0f, 7.0f}, 3, 1);
  EXPECT_EQ(one.ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(one.weights[0], 1.0f);
  const Routed all = Route({1.0f, 2.0f, 3.0f}, 3, 3);
  EXPECT_EQ(all.ids, (std::vector<int32_t>{2, 1, 0}));
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(all.weights[0], std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(all.weights[2], std::exp(1.0) / z, 1e-7);
}

// Rows are routed independently: a row's choice and weights are the same bits alone or batched.
TEST(MoeRouting, RowsAreIndependent) {
  const std::vector<float> a = {0.3f, -1.2f, 2.5f, 2.4f, 0.0f, 1.1f, -0.7f, 0.9f};
  const std::vector<float> b = {4.0f, 4.0f, -3.0f, 0.5f, 0.25f, 0.125f, 9.0f, -9.0f};
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const Routed batched = Route(both, 8, 3);
  const Routed ra = Route(a, 8, 3), rb = Route(b, 8, 3);
  EXPECT_EQ(std::vector<int32_t>(batched.ids.begin(), batched.ids.begin() + 3), ra.ids);
  EXPECT_EQ(std::vector<int32_t>(batched.ids.begin() + 3, batched.ids.end()), rb.ids);
  EXPECT_EQ(std::vector<float>(batched.weights.begin(), batched.weights.begin() + 3), ra.weights);
  EXPECT_EQ(std::vector<float>(batched.weights.begin() + 3, batched.weights.end()), rb.weights);
  EXPECT_EQ(rb.ids, (std::vector<int32_t>{6, 0, 1}));
}

// GroupByExpert: each expert's rows ascending, with each entry's place row * k + j.
TEST(MoeRouting, GroupByExpertListsEachExpertsRowsInOrder) {
  const Backend& be = TestBackend();
  // 3 rows, k = 2, 4 experts: row 0 -> {2, 0}, row 1 -> {0, 3}, row 2 -> {2, 0}; expert 1 unused.
  const std::vector<int32_t> ids = {2, 0, 0, 3, 2, 0};
  ExpertGroups g;
  be.GroupByExpert(ids, 2, 4, g);
  EXPECT_EQ(g.begin, (std::vector<int32_t>{0, 3, 3, 5, 6}));
  EXPECT_EQ(g.rows, (std::vector<int32_t>{0, 1, 2, 0, 2, 1}));
  EXPECT_EQ(g.slots, (std::vector<int32_t>{1, 2, 5, 0, 4, 3}));
  EXPECT_EQ(g.rows_of(1), 0);
  // Reused for a smaller step: nothing of the last one is left.
  be.GroupByExpert(std::vector<int32_t>{3}, 1, 4, g);
  EXPECT_EQ(g.begin, (std::vector<int32_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(g.rows, (std::vector<int32_t>{0}));
  EXPECT_EQ(g.slots, (std::vector<int32_t>{0}));
}

// x row i += Σ_j w[i, j] · slot (i, j), and ScatterRows places rows by index.
TEST(MoeRouting, ScatterAndWeightedSum) {
  const Backend& be = TestBackend();
  auto ws = be.NewWorkspace({.n_threads = 1});
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};  // 3 rows of 2
  std::vector<float> slots(8, 0.0f);                  // 4 rows of 2
  const std::vector<int32_t> where = {3, 0, 2};
  be.ScatterRows(src.data(), 2, where, 2, slots.data(), *ws);
  EXPECT_EQ(slots, (std::vector<float>{3, 4, 0, 0, 5, 6, 1, 2}));
  std::vector<float> x = {10, 20, 30, 40};  // 2 rows of 2, k = 2
  const std::vector<float> weights = {0.5f, 0.25f, 1.0f, 2.0f};
  be.AddWeightedRows(x.data(), slots.data(), weights.data(), 2, 2, 2, *ws);
  EXPECT_EQ(x, (std::vector<float>{10 + 1.5f, 20 + 2.0f, 30 + 5 + 2, 40 + 6 + 4}));
}

// ---- Metadata --------------------------------------------------------------------------------

using Edited = testing::EditedModel;

// The F32 file with `edit` applied after its metadata, loaded from memory.
Edited LoadEdited(const std::function<void(GgufWriter&)>& edit) {
  return testing::LoadEditedModel(ModelPath("arch/qwen3moe-f32.gguf"), "", edit);
}

TEST(MoeMetadata, ExpertKeysAreRangeChecked) {
  struct Case {
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](GgufWriter& w) { w.SetUint32("qwen3moe.expert_used_count", 5); },
       "edited.gguf: metadata key 'qwen3moe.expert_used_count' = 5 is out of range (1 to "
       "expert_count 4)"},
      {[](GgufWriter& w) { w.SetUint32("qwen3moe.expert_used_count", 0); },
       "'qwen3moe.expert_used_count' = 0 is out of range"},
      {[](GgufWriter& w) { w.SetUint32("qwen3moe.expert_count", 0); },
       "'qwen3moe.expert_count' = 0 is out of range (1 to 1024)"},
      // The tensors hold 4 experts of 256.
      {[](GgufWriter& w) { w.SetUint32("qwen3moe.expert_count", 8); },
       "tensor 'blk.0.ffn_gate_inp.weight' has shape [256, 4], expected [256, 8]"},
      {[](GgufWriter& w) { w.SetUint32("qwen3moe.expert_feed_forward_length", 512); },
       "tensor 'blk.0.ffn_gate_exps.weight' has shape [256, 256, 4], expected [256, 512, 4]"},
  };
  for (const Case& c : cases) {
    Edited e = LoadEdited(c.edit);
    ASSERT_FALSE(e.model.ok()) << "loaded; expected: " << c.expected;
    EXPECT_NE(e.model.message().find(c.expected), std::string::npos) << e.model.message();
  }
}

// Every expert matrix is declared (packing and bench walk them): 2 layers of 4 q/k/v/o + router,
// 4 experts x 3, and the output; the experts with their routed share.
TEST(MoeMetadata, EveryExpertMatrixIsDeclared) {
  auto model = LoadOrDie("arch/qwen3moe-f32.gguf");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->matrices().size(), 1u + 2 * (5 + 4 * 3));
  // A token multiplies 2 of the 4 experts: each expert matrix's share is 1/2 (what bench's
  // ceilings count), every other matrix's 1.
  int halves = 0, wholes = 0;
  for (const WeightMatrix* m : model->matrices()) {
    const double share = model->TokenShare(m);
    halves += share == 0.5;
    wholes += share == 1.0;
  }
  EXPECT_EQ(halves, 2 * 4 * 3);
  EXPECT_EQ(wholes, 1 + 2 * 5);
}

// ---- Many experts ----------------------------------------------------------------------------

// `kvserve synth --arch qwen3moe`'s model: 16 experts of which 4 are used, Q8_0 (each expert's
// slice packed on its own). A 27-token batch routes several tokens to most experts; the logits are
// still the same bits as one token at a time and as recomputing.
TEST(MoeSynthetic, ManyExpertsQ8AreBatchInvariant) {
  auto vocab = GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  SyntheticOptions options{.shape = {.arch = "qwen3moe",
                                     .n_embd = 256,
                                     .n_layers = 2,
                                     .n_heads = 4,
                                     .n_kv_heads = 2,
                                     .n_ff = 128,
                                     .n_ctx = 64,
                                     .n_expert = 16,
                                     .n_expert_used = 4},
                           .type = GgmlType::kQ8_0,
                           .seed = 3,
                           .stddev = 0.05f,
                           .n_threads = 2};
  auto synth = SyntheticModel::Create(options, *vocab);
  ASSERT_TRUE(synth.ok()) << synth.message();
  const std::string path = testing::TempDir() + "/moe-synth-q8_0.gguf";
  ASSERT_TRUE(synth->WriteFile(path).ok());
  auto model = LoadModel(path, TestBackend());
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ((*model)->matrices().size(), 1u + 2 * (5 + 16 * 3));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 27; ++i) tokens.push_back((i * 131 + 7) % 512);
  const std::vector<float> batch = Logits(**model, tokens, Mode::kBatch);
  ASSERT_EQ(batch.size(), tokens.size() * 512);
  EXPECT_TRUE(std::all_of(batch.begin(), batch.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_TRUE(Logits(**model, tokens, Mode::kIncremental) == batch);
  EXPECT_TRUE(Logits(**model, tokens, Mode::kNoCache) == batch);
}

}  // namespace
}  // namespace kvserve
