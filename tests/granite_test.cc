// granite_test: the granite architecture, added as one file (src/model/arch/granite.cc) after the
// seams, checked against llama on stories260K's trained weights:
// - a granite file without its four scales computes llama's logits bit for bit;
// - with them (embedding 2.5, residual 0.25, attention 0.09, logits / 6) it computes what llama
//   computes on the same weights with each scale folded in (token_embd x 2.5, attn_output and
//   ffn_down x 0.25, attn_q x 0.09 sqrt(head_dim), output / 6), to float rounding, with the same
//   most likely token at every position; a scale left out fails both;
// - batch, incremental and no-cache runs agree bit for bit;
// - a GraniteForCausalLM folder gives the granite file's logits bit for bit, and `kvserve
//   convert` writes llama.cpp's four granite keys;
// - a file without RoPE (rope.scaling.finetuned false) or with a negative scale is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/architecture.h"
#include "model/model.h"
#include "support/forward.h"
#include "support/hf_weights.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using testing::Layout;
using testing::ModelPath;
namespace fs = std::filesystem;

constexpr float kEmbedding = 2.5f;
constexpr float kResidual = 0.25f;
constexpr float kAttention = 0.09f;
constexpr float kLogit = 6.0f;

const GgufFile& Stories() {
  static const GgufFile file = [] {
    auto f = GgufFile::Open(ModelPath("stories260K.gguf"));
    EXPECT_TRUE(f.ok()) << f.message();
    return std::move(f).value();
  }();
  return file;
}

// A tensor's f32 values times `factor`, as bytes.
std::vector<uint8_t> Scaled(const TensorInfo& t, float factor) {
  EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
  std::vector<float> values(t.n_elements);
  std::memcpy(values.data(), t.data, t.n_bytes);
  for (float& v : values) v *= factor;
  std::vector<uint8_t> bytes(t.n_bytes);
  std::memcpy(bytes.data(), values.data(), t.n_bytes);
  return bytes;
}

// stories260K rewritten: its metadata with "llama." keys renamed to "<arch>.", extra float keys
// (and with no_rope, <arch>.rope.scaling.finetuned false), each tensor multiplied by factor(name).
std::string Rewrite(const std::string& name, const std::string& arch,
                    const std::map<std::string, float>& floats,
                    const std::function<float(const std::string&)>& factor, bool no_rope = false) {
  const GgufFile& in = Stories();
  GgufWriter w(in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.architecture") continue;
    w.CopyValue(key.rfind("llama.", 0) == 0 ? arch + key.substr(5) : key, value);
  }
  w.SetString("general.architecture", arch);
  for (const auto& [key, value] : floats) w.SetFloat32(arch + "." + key, value);
  if (no_rope) w.SetBool(arch + ".rope.scaling.finetuned", false);
  for (const TensorInfo& t : in.tensors()) {
    const float f = factor(t.name);
    w.AddTensor(t.name, t.type, t.dims,
                f == 1.0f ? std::vector<uint8_t>(t.data, t.data + t.n_bytes) : Scaled(t, f));
  }
  const std::string path = testing::TempDir() + "/" + name + ".gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

float Unscaled(const std::string&) { return 1.0f; }

const std::map<std::string, float> kScales = {{"embedding_scale", kEmbedding},
                                              {"residual_scale", kResidual},
                                              {"attention.scale", kAttention},
                                              {"logit_scale", kLogit}};

// Llama's weights with the granite scales folded in.
float Folded(const std::string& name) {
  const int head_dim = static_cast<int>(Stories().GetUint("llama.embedding_length").value() /
                                        Stories().GetUint("llama.attention.head_count").value());
  auto ends = [&](const char* suffix) {
    return name.size() >= std::strlen(suffix) &&
           name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0;
  };
  if (name == "token_embd.weight") return kEmbedding;
  if (name == "output.weight") return 1.0f / kLogit;
  if (ends("attn_output.weight") || ends("ffn_down.weight")) return kResidual;
  if (ends("attn_q.weight")) return kAttention * std::sqrt(static_cast<float>(head_dim));
  return 1.0f;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 429, 271, 288, 259, 365, 314, 290};

float WorstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

TEST(GraniteTest, WithoutItsScalesItComputesLlamaBitForBit) {
  auto granite = testing::LoadPathOrDie(Rewrite("granite-unscaled", "granite", {}, Unscaled));
  auto llama = testing::LoadPathOrDie(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(granite && llama);
  EXPECT_EQ(granite->config().arch, "granite");
  const std::vector<float> a = testing::AllPositionLogits(*granite, kPrompt);
  const std::vector<float> b = testing::AllPositionLogits(*llama, kPrompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0);
}

TEST(GraniteTest, ItsScalesComputeWhatLlamaComputesWithThemFoldedIntoTheWeights) {
  ASSERT_NE(Stories().FindTensor("output.weight"), nullptr);  // untied: the logit scale folds
  auto granite = testing::LoadPathOrDie(Rewrite("granite-scaled", "granite", kScales, Unscaled));
  auto folded = testing::LoadPathOrDie(Rewrite("llama-folded", "llama", {}, Folded));
  auto plain = testing::LoadPathOrDie(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(granite && folded && plain);
  const std::vector<float> a = testing::AllPositionLogits(*granite, kPrompt);
  const std::vector<float> b = testing::AllPositionLogits(*folded, kPrompt);
  const std::vector<float> c = testing::AllPositionLogits(*plain, kPrompt);
  float scale = 0;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  EXPECT_LT(WorstDifference(a, b), 1e-5f * scale);
  EXPECT_GT(WorstDifference(a, c), 1e-2f * scale);  // the scales change the answer
  const int n_vocab = plain->config().n_vocab;
  EXPECT_EQ(testing::ArgmaxPerRow(a, n_vocab), testing::ArgmaxPerRow(b, n_vocab));
}

TEST(GraniteTest, BatchIncrementalAndNoCacheAgreeBitForBit) {
  auto granite = testing::LoadPathOrDie(Rewrite("granite-scaled", "granite", kScales, Unscaled));
  ASSERT_TRUE(granite);
  const std::vector<float> batch = testing::Logits(*granite, kPrompt, testing::Mode::kBatch);
  for (testing::Mode mode : {testing::Mode::kIncremental, testing::Mode::kNoCache}) {
    const std::vector<float> other = testing::Logits(*granite, kPrompt, mode);
    ASSERT_EQ(other.size(), batch.size());
    EXPECT_EQ(std::memcmp(other.data(), batch.data(), sizeof(float) * batch.size()), 0)
        << testing::ModeName(mode);
  }
}

// A GraniteForCausalLM folder holding stories260K's weights and the four multipliers.
const std::string& GraniteFolder() {
  static const std::string dir = [] {
    const std::string out = testing::TempDir() + "/hf-granite-stories260K";
    fs::create_directories(out);
    const GgufFile& gguf = Stories();
    const int n_heads = static_cast<int>(gguf.GetUint("llama.attention.head_count").value());
    const int n_kv = static_cast<int>(gguf.GetUint("llama.attention.head_count_kv").value());
    const ordered_json config = {
        {"architectures", {"GraniteForCausalLM"}},
        {"model_type", "granite"},
        {"hidden_size", gguf.GetUint("llama.embedding_length").value()},
        {"num_hidden_layers", gguf.GetUint("llama.block_count").value()},
        {"num_attention_heads", n_heads},
        {"num_key_value_heads", n_kv},
        {"intermediate_size", gguf.GetUint("llama.feed_forward_length").value()},
        {"max_position_embeddings", gguf.GetUint("llama.context_length").value()},
        {"rms_norm_eps", gguf.GetFloat("llama.attention.layer_norm_rms_epsilon").value()},
        {"rope_theta", gguf.GetFloatOr("llama.rope.freq_base", 10000.0).value()},
        {"rope_scaling", nullptr},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"mlp_bias", false},
        {"tie_word_embeddings", false},
        {"embedding_multiplier", kEmbedding},
        {"residual_multiplier", kResidual},
        {"attention_multiplier", kAttention},
        {"logits_scaling", kLogit},
        {"vocab_size", gguf.GetStringArray("tokenizer.ggml.tokens")->size()},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
    };
    EXPECT_TRUE(testing::WriteText(out + "/config.json", config.dump(2)));
    testing::WriteWeights(gguf, out, "model.layers.", testing::LlamaHfNameRules(), n_heads, n_kv,
                          /*shards=*/false);
    testing::WriteSpmTokenizerFiles(gguf, out);
    return out;
  }();
  return dir;
}

TEST(GraniteTest, FolderAndItsConversionGiveTheGraniteFilesLogitsBitForBit) {
  EXPECT_EQ(FindHfClass("GraniteForCausalLM", "").architecture, FindArchitecture("granite"));
  const std::string out = testing::TempDir() + "/granite-from-hf.gguf";
  const std::string command = testing::KvserveBinary() + " convert -m '" + GraniteFolder() +
                              "' -o '" + out + "' --type f32 >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto file = GgufFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->GetString("general.architecture").value(), "granite");
  for (const auto& [key, value] : kScales) {
    EXPECT_EQ(file->GetFloat("granite." + key).value(), value) << key;
  }
  auto granite = testing::LoadPathOrDie(Rewrite("granite-scaled", "granite", kScales, Unscaled));
  auto folder = testing::LoadPathOrDie(GraniteFolder());
  auto converted = testing::LoadPathOrDie(out);
  ASSERT_TRUE(granite && folder && converted);
  const std::vector<float> want = testing::AllPositionLogits(*granite, kPrompt);
  for (const Model* model : {folder.get(), converted.get()}) {
    const std::vector<float> got = testing::AllPositionLogits(*model, kPrompt);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0);
  }
}

TEST(GraniteTest, NoRopeAndNegativeScalesAreRefusedByName) {
  const std::string path = Rewrite("granite-no-rope", "granite", {}, Unscaled, /*no_rope=*/true);
  auto refused = LoadModel(path, TestBackend());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("'granite.rope.scaling.finetuned' = false"), std::string::npos)
      << refused.message();

  auto negative = LoadModel(
      Rewrite("granite-negative", "granite", {{"residual_scale", -0.5f}}, Unscaled), TestBackend());
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.message().find("'granite.residual_scale' = -0.5"), std::string::npos)
      << negative.message();
}

}  // namespace
}  // namespace kvserve
