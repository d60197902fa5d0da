// exaone_test: the exaone architecture, added as one file (src/model/arch/exaone.cc) after the
// architecture seam:
// - an ExaoneForCausalLM folder holding stories260K's weights (q/k rows in Hugging Face's
//   rotate-half order, GPT-2-style names, EXAONE's config keys) computes what the llama GGUF
//   computes: split-half RoPE on unpermuted rows is llama's interleaved RoPE on permuted rows, so
//   the logits agree to float rounding (the q.k sums run in another order) and every position's
//   most likely token is the same;
// - `kvserve convert` writes it as an `exaone` GGUF with llama.cpp's keys, which loads by its
//   GGUF name and gives the folder's logits bit for bit;
// - config.json keys it cannot compute are refused, naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "model/architecture.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
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

// EXAONE's config.json for stories260K's shape.
ordered_json ExaoneConfig(const GgufFile& gguf) {
  return {
      {"architectures", {"ExaoneForCausalLM"}},
      {"model_type", "exaone"},
      {"hidden_size", gguf.GetUint("llama.embedding_length").value()},
      {"num_layers", gguf.GetUint("llama.block_count").value()},
      {"num_attention_heads", gguf.GetUint("llama.attention.head_count").value()},
      {"num_key_value_heads", gguf.GetUint("llama.attention.head_count_kv").value()},
      {"intermediate_size", gguf.GetUint("llama.feed_forward_length").value()},
      {"max_position_embeddings", gguf.GetUint("llama.context_length").value()},
      {"layer_norm_epsilon", gguf.GetFloat("llama.attention.layer_norm_rms_epsilon").value()},
      {"rope_theta", gguf.GetFloatOr("llama.rope.freq_base", 10000.0).value()},
      {"rope_scaling", nullptr},
      {"activation_function", "silu"},
      {"tie_word_embeddings", gguf.FindTensor("output.weight") == nullptr},
      {"vocab_size", gguf.GetStringArray("tokenizer.ggml.tokens")->size()},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
}

// An ExaoneForCausalLM folder made from stories260K.gguf (built once per test process).
const std::string& ExaoneFolder() {
  static const std::string dir = [] {
    const std::string out = testing::TempDir() + "/hf-exaone-stories260K";
    fs::create_directories(out);
    auto gguf = GgufFile::Open(ModelPath("stories260K.gguf"));
    EXPECT_TRUE(gguf.ok()) << gguf.message();
    EXPECT_TRUE(testing::WriteText(out + "/config.json", ExaoneConfig(*gguf).dump(2)));
    const std::vector<testing::NameRule> rules = {
        {"token_embd.weight", "transformer.wte.weight", Layout::kSame},
        {"output_norm.weight", "transformer.ln_f.weight", Layout::kSame},
        {"output.weight", "lm_head.weight", Layout::kSame},
        {"attn_norm.weight", "ln_1.weight", Layout::kSame},
        {"attn_q.weight", "attn.attention.q_proj.weight", Layout::kRotateHalf},
        {"attn_k.weight", "attn.attention.k_proj.weight", Layout::kRotateHalf},
        {"attn_v.weight", "attn.attention.v_proj.weight", Layout::kSame},
        {"attn_output.weight", "attn.attention.out_proj.weight", Layout::kSame},
        {"ffn_norm.weight", "ln_2.weight", Layout::kSame},
        {"ffn_gate.weight", "mlp.c_fc_0.weight", Layout::kSame},
        {"ffn_up.weight", "mlp.c_fc_1.weight", Layout::kSame},
        {"ffn_down.weight", "mlp.c_proj.weight", Layout::kSame},
    };
    const int n_heads = static_cast<int>(gguf->GetUint("llama.attention.head_count").value());
    const int n_kv = static_cast<int>(gguf->GetUint("llama.attention.head_count_kv").value());
    testing::WriteWeights(*gguf, out, "transformer.h.", rules, n_heads, n_kv, /*shards=*/false);
    testing::WriteSpmTokenizerFiles(*gguf, out);
    return out;
  }();
  return dir;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 429, 271, 288, 259, 365, 314, 290};

TEST(ExaoneTest, FolderComputesWhatTheLlamaFileComputes) {
  auto exaone = testing::LoadPathOrDie(ExaoneFolder());
  auto llama = testing::LoadPathOrDie(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(exaone && llama);
  EXPECT_EQ(exaone->config().arch, "exaone");
  const std::vector<float> a = testing::AllPositionLogits(*exaone, kPrompt);
  const std::vector<float> b = testing::AllPositionLogits(*llama, kPrompt);
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LT(worst, 1e-4f);
  EXPECT_GT(worst, -1.0f);  // a NaN fails the bound above
  const int n_vocab = llama->config().n_vocab;
  EXPECT_EQ(testing::ArgmaxPerRow(a, n_vocab), testing::ArgmaxPerRow(b, n_vocab));
}

TEST(ExaoneTest, ConvertedFileHasLlamaCppsKeysAndTheFoldersLogits) {
  const std::string out = testing::TempDir() + "/exaone-from-hf.gguf";
  const std::string command = testing::KvserveBinary() + " convert -m '" + ExaoneFolder() +
                              "' -o '" + out + "' --type f32 >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto file = GgufFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.message();
  auto stories = GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(stories.ok());
  EXPECT_EQ(file->GetString("general.architecture").value(), "exaone");
  EXPECT_EQ(file->GetFloat("exaone.attention.layer_norm_rms_epsilon").value(),
            stories->GetFloat("llama.attention.layer_norm_rms_epsilon").value());
  EXPECT_EQ(file->GetUint("exaone.block_count").value(),
            stories->GetUint("llama.block_count").value());
  EXPECT_EQ(file->GetUint("exaone.rope.dimension_count").value(),
            stories->GetUint("llama.rope.dimension_count").value());
  EXPECT_FALSE(file->GetUint("exaone.vocab_size").ok());  // llama's converter key only
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_gate.weight",
                           "blk.0.ffn_up.weight", "blk.0.ffn_down.weight", "output_norm.weight"}) {
    EXPECT_NE(file->FindTensor(name), nullptr) << name;
  }
  auto converted = testing::LoadPathOrDie(out);
  auto folder = testing::LoadPathOrDie(ExaoneFolder());
  ASSERT_TRUE(converted && folder);
  const std::vector<float> a = testing::AllPositionLogits(*converted, kPrompt);
  const std::vector<float> b = testing::AllPositionLogits(*folder, kPrompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

TEST(ExaoneTest, TheRegistryFindsItByGgufNameAndHuggingFaceClass) {
  ASSERT_NE(FindArchitecture("exaone"), nullptr);
  EXPECT_NE(SupportedArchitectures().find("exaone"), std::string::npos);
  EXPECT_EQ(FindHfClass("ExaoneForCausalLM", "").architecture, FindArchitecture("exaone"));
  EXPECT_EQ(FindHfClass("", "exaone").architecture, FindArchitecture("exaone"));
}

TEST(ExaoneTest, KeysItCannotComputeAreRefusedByName) {
  auto stories = GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(stories.ok());
  const ordered_json base = ExaoneConfig(*stories);
  ASSERT_TRUE(ParseHfConfig(base.dump(), "config.json").ok());
  auto message = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  ordered_json j = base;
  j["activation_function"] = "gelu";
  EXPECT_NE(message(j).find("'activation_function' = \"gelu\""), std::string::npos) << message(j);
  j = base;
  j.erase("layer_norm_epsilon");
  EXPECT_NE(message(j).find("missing required key 'layer_norm_epsilon'"), std::string::npos);
  j = base;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(message(j).find("'rope_scaling.rope_type' = \"yarn\""), std::string::npos);
  j = base;
  j["partial_rotary_factor"] = 0.5;
  EXPECT_NE(message(j).find("'partial_rotary_factor' = 0.5"), std::string::npos);
  j = base;
  j["head_dim"] = 7;
  EXPECT_NE(message(j).find("head dimension 7"), std::string::npos);
  // A tensor outside the map is named.
  auto c = ParseHfConfig(base.dump(), "config.json");
  ASSERT_TRUE(c.ok());
  auto unknown = MapHfTensor("transformer.h.0.attn.attention.q_norm.weight", *c);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("'transformer.h.0.attn.attention.q_norm.weight'"),
            std::string::npos);
  auto rotary = MapHfTensor("transformer.h.0.attn.attention.rotary.inv_freq", *c);
  ASSERT_TRUE(rotary.ok());
  EXPECT_TRUE(rotary->name.empty());  // recomputed from rope_theta
}

}  // namespace
}  // namespace kvserve
