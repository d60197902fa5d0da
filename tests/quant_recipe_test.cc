// The quantization recipes (model/quant_recipe.h) give every tensor the type llama.cpp's
// `llama-quantize` gives it: the plan of converting each F32 file of ../shared/models/arch is
// compared, tensor by tensor, with the quantized files llama.cpp made from it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "io/gguf_reader.h"
#include "model/gguf_converter.h"
#include "model/quant_recipe.h"
#include "support/paths.h"

namespace kvserve {
namespace {

std::map<std::string, GgmlType> TypesOf(const GgufFile& file) {
  std::map<std::string, GgmlType> types;
  for (const TensorInfo& t : file.tensors()) types[t.name] = t.type;
  return types;
}

struct Case {
  std::string arch;    // file prefix in ../shared/models/arch
  std::string recipe;  // --type, and the quantized file's suffix
};

class QuantRecipeTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantRecipeTest, EveryTensorGetsLlamaCppsType) {
  const Case& c = GetParam();
  auto source = GgufFile::Open(testing::ModelPath("arch/" + c.arch + "-f32.gguf"));
  ASSERT_TRUE(source.ok()) << source.message();
  auto reference = GgufFile::Open(testing::ModelPath("arch/" + c.arch + "-" + c.recipe + ".gguf"));
  ASSERT_TRUE(reference.ok()) << reference.message();
  auto recipe = QuantRecipe::Find(c.recipe);
  ASSERT_TRUE(recipe.ok()) << recipe.message();
  auto converter = GgufConverter::Create(*source, *recipe);
  ASSERT_TRUE(converter.ok()) << converter.message();
  const std::map<std::string, GgmlType> want = TypesOf(*reference);
  ASSERT_EQ(converter->plan().size(), want.size());
  for (const GgufConverter::TensorPlan& plan : converter->plan()) {
    auto it = want.find(plan.source->name);
    ASSERT_NE(it, want.end()) << plan.source->name;
    EXPECT_EQ(plan.type, it->second) << plan.source->name << ": " << GgmlTypeName(plan.type)
                                     << " instead of " << GgmlTypeName(it->second);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* arch : {"llama3", "qwen2"}) {
    for (const char* recipe :
         {"q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
      cases.push_back({arch, recipe});
    }
  }
  for (const char* arch : {"qwen3", "phi3", "gemma2", "gemma3", "qwen3moe"}) {
    cases.push_back({arch, "q4_k_m"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Files, QuantRecipeTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return info.param.arch + "_" + info.param.recipe;
                         });

// The recipes the fixtures do not cover (the _S and _L ones, grouped-query and 8-expert models),
// against llama.cpp's llama_tensor_get_type rules written out per tensor. (Checked on this
// machine against llama-quantize's output for a 32-layer GQA-4, a 17-layer MHA and a 9-layer
// 8-expert model: every tensor of every recipe the same type.)
GgmlType TypeIn(const char* recipe, const std::string& tensor, const QuantModelShape& shape) {
  auto r = QuantRecipe::Find(recipe);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? r->TypeOf(tensor, shape, tensor == "output.weight") : GgmlType::kF32;
}

std::string Blk(int layer, const char* tensor) {
  return "blk." + std::to_string(layer) + "." + tensor + ".weight";
}

TEST(QuantRecipe, SmallAndLargeRecipesFollowLlamaCppsRules) {
  const QuantModelShape gqa4{.n_layers = 32, .n_gqa = 4};
  using T = GgmlType;
  for (const char* r : {"q3_k_s", "q3_k_l", "q4_k_s", "q5_k_s"}) {
    EXPECT_EQ(TypeIn(r, "output.weight", gqa4), T::kQ6_K) << r;
  }
  for (int layer : {0, 3, 4, 31}) {
    EXPECT_EQ(TypeIn("q3_k_s", Blk(layer, "attn_v"), gqa4), T::kQ3_K);
    EXPECT_EQ(TypeIn("q3_k_s", Blk(layer, "ffn_down"), gqa4), T::kQ3_K);
    EXPECT_EQ(TypeIn("q3_k_s", Blk(layer, "attn_output"), gqa4), T::kQ3_K);
    EXPECT_EQ(TypeIn("q3_k_l", Blk(layer, "attn_v"), gqa4), T::kQ5_K);
    EXPECT_EQ(TypeIn("q3_k_l", Blk(layer, "ffn_down"), gqa4), T::kQ5_K);
    EXPECT_EQ(TypeIn("q3_k_l", Blk(layer, "attn_output"), gqa4), T::kQ5_K);
    EXPECT_EQ(TypeIn("q3_k_l", Blk(layer, "ffn_up"), gqa4), T::kQ3_K);
    EXPECT_EQ(TypeIn("q4_k_s", Blk(layer, "attn_v"), gqa4), layer < 4 ? T::kQ5_K : T::kQ4_K);
    EXPECT_EQ(TypeIn("q4_k_s", Blk(layer, "ffn_down"), gqa4), layer < 4 ? T::kQ5_K : T::kQ4_K);
    EXPECT_EQ(TypeIn("q4_k_s", Blk(layer, "attn_q"), gqa4), T::kQ4_K);
    EXPECT_EQ(TypeIn("q5_k_s", Blk(layer, "attn_v"), gqa4), T::kQ5_K);
    EXPECT_EQ(TypeIn("q5_k_s", Blk(layer, "ffn_down"), gqa4), T::kQ5_K);
    // Four or more heads per key/value head: larger value projections for q2_k and iq4_nl.
    EXPECT_EQ(TypeIn("q2_k", Blk(layer, "attn_v"), gqa4), T::kQ4_K);
    EXPECT_EQ(TypeIn("q2_k", Blk(layer, "attn_v"), {.n_layers = 32, .n_gqa = 2}), T::kQ3_K);
    EXPECT_EQ(TypeIn("iq4_nl", Blk(layer, "attn_v"), gqa4), T::kQ5_K);
    EXPECT_EQ(TypeIn("iq4_nl", Blk(layer, "ffn_down"), gqa4), layer < 4 ? T::kQ5_K : T::kIQ4_NL);
  }
}

TEST(QuantRecipe, EightExpertModelsKeepAttentionInMoreBits) {
  const QuantModelShape moe{.n_layers = 9, .n_gqa = 4, .n_expert = 8};
  using T = GgmlType;
  for (const char* r : {"q2_k", "q3_k_m", "q4_k_m", "q5_k_s", "q6_k", "iq4_nl", "q4_1", "q5_0"}) {
    EXPECT_EQ(TypeIn(r, Blk(1, "attn_v"), moe), T::kQ8_0) << r;
    EXPECT_EQ(TypeIn(r, Blk(1, "attn_k"), moe), T::kQ8_0) << r;
  }
  for (const char* r : {"q2_k", "q3_k_s", "q3_k_m", "q4_k_s", "q4_k_m", "iq4_nl"}) {
    EXPECT_EQ(TypeIn(r, Blk(1, "attn_output"), moe), T::kQ5_K) << r;
  }
  EXPECT_EQ(TypeIn("q3_k_l", Blk(1, "attn_output"), moe), T::kQ3_K);
  EXPECT_EQ(TypeIn("q5_1", Blk(1, "attn_output"), moe), T::kQ5_1);
  EXPECT_EQ(TypeIn("q4_k_m", Blk(1, "attn_k"), {.n_layers = 9, .n_expert = 64}), T::kQ4_K);
  EXPECT_EQ(TypeIn("q4_k_m", Blk(1, "ffn_gate_inp"), moe), T::kF32);
}

// llama.cpp's MXFP4_MOE: 3-D tensors of more than one expert in MXFP4, every other matrix (output
// and token embedding included) in Q8_0, the router F32. (tests/mxfp4_test.cc checks a converted
// qwen3moe against llama-quantize's file byte for byte.) mxfp4 puts every matrix in MXFP4.
TEST(QuantRecipe, Mxfp4MoePutsTheExpertsInMxfp4AndTheRestInQ8_0) {
  const QuantModelShape moe{.n_layers = 24, .n_gqa = 8, .n_expert = 32};
  auto r = QuantRecipe::Find("mxfp4_moe");
  ASSERT_TRUE(r.ok()) << r.message();
  using T = GgmlType;
  EXPECT_EQ(r->main_type(), T::kMXFP4);
  EXPECT_EQ(r->file_type(), 38u);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    EXPECT_EQ(r->TypeOf(Blk(3, t), moe, false, 32), T::kMXFP4) << t;
    EXPECT_EQ(r->TypeOf(Blk(3, t), moe, false, 1), T::kQ8_0) << t << ": one expert";
  }
  for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_down", "ffn_gate"}) {
    EXPECT_EQ(r->TypeOf(Blk(3, t), moe, false), T::kQ8_0) << t;
  }
  EXPECT_EQ(r->TypeOf("output.weight", moe, true), T::kQ8_0);
  EXPECT_EQ(r->TypeOf("token_embd.weight", moe, false), T::kQ8_0);
  EXPECT_EQ(r->TypeOf("token_embd.weight", moe, true), T::kQ8_0);  // tied
  EXPECT_EQ(r->TypeOf(Blk(3, "ffn_gate_inp"), moe, false), T::kF32);
  auto uniform = QuantRecipe::Find("mxfp4");
  ASSERT_TRUE(uniform.ok()) << uniform.message();
  EXPECT_EQ(uniform->TypeOf("output.weight", moe, true), T::kMXFP4);
  EXPECT_EQ(uniform->TypeOf(Blk(3, "attn_v"), moe, false), T::kMXFP4);
  EXPECT_EQ(QuantRecipe::Uniform(T::kMXFP4).name(), "mxfp4");
}

TEST(QuantRecipe, UnknownNamesAreRefusedWithTheChoices) {
  auto recipe = QuantRecipe::Find("iq2_xxs");
  ASSERT_FALSE(recipe.ok());
  EXPECT_NE(recipe.message().find("'iq2_xxs'"), std::string::npos) << recipe.message();
  EXPECT_NE(recipe.message().find("q4_k_m"), std::string::npos) << recipe.message();
}

// llama-quantize keeps these whatever the file type (its tensor_allows_quantization): Qwen3.5's
// and Mamba's ssm_conv1d, LFM2's short convolutions, RWKV's time_mix matrices, norms, routers,
// Gemma's per-layer projection. The delta net's other matrices are quantized as any other.
TEST(QuantRecipe, TensorsLlamaCppNeverQuantizesStayF32) {
  const QuantModelShape shape{.n_layers = 8, .n_gqa = 2};
  using T = GgmlType;
  for (const char* r : {"f16", "bf16", "q8_0", "q4_0", "q2_k", "q4_k_m", "q6_k", "mxfp4_moe"}) {
    for (const std::string& t :
         {Blk(2, "ssm_conv1d"), Blk(0, "shortconv.conv"), Blk(1, "time_mix_w1"),
          Blk(1, "time_mix_lerp_fused"), Blk(1, "time_mix_decay_w2"), Blk(3, "ssm_norm"),
          Blk(3, "attn_q_norm"), Blk(3, "ffn_gate_inp"), Blk(0, "altup_correct_coef"),
          Blk(0, "laurel_l"), Blk(0, "attn_rel_b"), Blk(0, "indexer.k_proj"),
          std::string("per_layer_model_proj.weight"), std::string("position_embd.weight"),
          std::string("token_types.weight")}) {
      EXPECT_EQ(TypeIn(r, t, shape), T::kF32) << r << " " << t;
    }
  }
  EXPECT_EQ(TypeIn("q4_k_m", Blk(2, "ssm_out"), shape), T::kQ4_K);
  EXPECT_EQ(TypeIn("q4_k_m", Blk(2, "ssm_alpha"), shape), T::kQ4_K);
  EXPECT_EQ(TypeIn("q4_k_m", Blk(2, "attn_gate"), shape), T::kQ4_K);
  EXPECT_EQ(TypeIn("q8_0", Blk(2, "ssm_beta"), shape), T::kQ8_0);
}

// llama.cpp counts every tensor whose name holds "ffn_down" as a down projection: a shared
// expert's (qwen35moe, qwen2moe) gets the same extra bits as the layer's dense or expert one.
TEST(QuantRecipe, SharedExpertDownProjectionsFollowTheDownRules) {
  const QuantModelShape moe{.n_layers = 8, .n_gqa = 2, .n_expert = 4};
  using T = GgmlType;
  for (int layer = 0; layer < 8; ++layer) {
    // More bits in layers 0, 3, 6 and 7 of 8 (the first and last eighth, every third between).
    const bool more = layer == 0 || layer == 3 || layer >= 6;
    EXPECT_EQ(TypeIn("q4_k_m", Blk(layer, "ffn_down_shexp"), moe), more ? T::kQ6_K : T::kQ4_K)
        << layer;
    EXPECT_EQ(TypeIn("q5_k_m", Blk(layer, "ffn_down_shexp"), moe), more ? T::kQ6_K : T::kQ5_K)
        << layer;
    EXPECT_EQ(TypeIn("q4_k_m", Blk(layer, "ffn_down_shexp"), moe),
              TypeIn("q4_k_m", Blk(layer, "ffn_down_exps"), moe))
        << layer;
    EXPECT_EQ(TypeIn("q2_k", Blk(layer, "ffn_down_shexp"), moe), T::kQ3_K) << layer;
    EXPECT_EQ(TypeIn("q4_k_m", Blk(layer, "ffn_up_shexp"), moe), T::kQ4_K) << layer;
  }
}

TEST(QuantRecipe, RowsOffTheSuperBlockTakeLlamaCppsFallback) {
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ4_K), GgmlType::kQ5_0);
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ5_K), GgmlType::kQ5_1);
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ6_K), GgmlType::kQ8_0);
  // llama.cpp 3f545becc: Q2_K and Q3_K rows fall back to Q4_0 (older versions took IQ4_NL).
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ2_K), GgmlType::kQ4_0);
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ3_K), GgmlType::kQ4_0);
  EXPECT_EQ(SuperBlockFallback(GgmlType::kQ8_0), GgmlType::kQ8_0);
}

}  // namespace
}  // namespace kvserve
