// Hugging Face Gemma 4 folders (model/gemma4_hf.h), written here from `kvserve synth` files by
// undoing what llama.cpp's converter does (GGUF names back to the HF ones, written apart from the
// loader's table; rope_freqs dropped and described by rope_parameters; shapes reversed): the
// gemma4-tiny preset (shared-KV layers, per-layer inputs, double-wide feed-forwards, windowed and
// global heads of their own sizes) as a multimodal Gemma4ForConditionalGeneration folder with
// vision and audio towers, and gemma4-moe-tiny (26B-A4B's experts) as a Gemma4ForCausalLM
// folder. The folder's view holds the synthesized file's tensors byte for byte and its gemma4.*
// keys; the model from the folder, and `kvserve convert` of it, give the file's logits bit for
// bit. Plus the proportional RoPE's rope_freqs, E2B's keys, and the refusals by key.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/gemma4_hf.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/forward.h"
#include "support/gguf_compare.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct Gemma4Case {
  const char* name;
  const char* preset;
  bool multimodal;  // Gemma4ForConditionalGeneration: text_config, "model.language_model." names
};

const Gemma4Case kCases[] = {
    {"Dense", "gemma4-tiny", true},
    {"Moe", "gemma4-moe-tiny", false},
};

void PrintTo(const Gemma4Case& c, std::ostream* os) { *os << c.name; }

std::string GgufOf(const Gemma4Case& c) {
  return testing::SynthesizedModel(c.preset, std::string("hf-") + c.preset + "-f32",
                                   GgmlType::kF32);
}

// GGUF "blk.N.<suffix>" -> HF "layers.N.<name>".
const std::map<std::string, std::string> kLayerNames = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
};

const std::map<std::string, std::string> kGlobalNames = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
    {"output_norm.weight", "norm.weight"},
};

// The synthesized file's tensors under HF names in one safetensors file.
void WriteWeights(const Gemma4Case& c, const GgufFile& gguf, const std::string& dir) {
  testing::SafetensorsBuilder weights;
  const std::string prefix = c.multimodal ? "model.language_model." : "model.";
  if (c.multimodal) {  // towers the text model leaves out
    for (const char* name : {"model.vision_tower.encoder.layers.0.mlp.down_proj.linear.weight",
                             "model.embed_vision.embedding_projection.weight",
                             "model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight",
                             "model.embed_audio.embedding_projection.weight"}) {
      weights.AddF32(name, {2, 4}, std::vector<float>(8, 0.5f));
    }
  }
  for (const TensorInfo& t : gguf.tensors()) {
    const std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    ASSERT_EQ(t.type, GgmlType::kF32) << t.name;
    if (t.name == "rope_freqs.weight") continue;  // rope_parameters.full_attention gives it
    if (auto it = kGlobalNames.find(t.name); it != kGlobalNames.end()) {
      weights.Add(prefix + it->second, "F32", shape, std::move(bytes));
      continue;
    }
    ASSERT_EQ(t.name.rfind("blk.", 0), 0u) << t.name;
    const size_t dot = t.name.find('.', 4);
    auto it = kLayerNames.find(t.name.substr(dot + 1));
    ASSERT_NE(it, kLayerNames.end()) << "no HF name for " << t.name;
    weights.Add(prefix + "layers." + t.name.substr(4, dot - 4) + "." + it->second, "F32", shape,
                std::move(bytes));
  }
  ASSERT_TRUE(weights.WriteFile(dir + "/model.safetensors"));
}

// The text config of the synthesized file, in Gemma 4's Hugging Face keys.
ordered_json TextConfigOf(const GgufFile& gguf) {
  auto u = [&](const std::string& key) { return gguf.GetUint("gemma4." + key).value(); };
  auto f = [&](const std::string& key) { return gguf.GetFloat("gemma4." + key).value(); };
  const int n_layers = static_cast<int>(u("block_count"));
  const int shared = static_cast<int>(u("attention.shared_kv_layers"));
  const std::vector<int64_t> n_ff = gguf.GetIntArray("gemma4.feed_forward_length").value();
  const GgufValue* pattern = gguf.Find("gemma4.attention.sliding_window_pattern");
  EXPECT_TRUE(pattern != nullptr && pattern->array_size == static_cast<uint64_t>(n_layers));
  ordered_json types = ordered_json::array();
  for (int i = 0; i < n_layers; ++i) {
    types.push_back(pattern->array_data[i] != 0 ? "sliding_attention" : "full_attention");
  }
  const uint64_t vocab = gguf.GetStringArray("tokenizer.ggml.tokens")->size();
  const uint64_t per_layer = u("embedding_length_per_layer_input");
  const bool moe = gguf.Find("gemma4.expert_count") != nullptr;
  ordered_json config = {
      {"model_type", "gemma4_text"},
      {"hidden_size", u("embedding_length")},
      {"num_hidden_layers", n_layers},
      {"num_attention_heads", u("attention.head_count")},
      {"num_key_value_heads", u("attention.head_count_kv")},
      {"num_global_key_value_heads", nullptr},
      {"head_dim", u("attention.key_length_swa")},
      {"global_head_dim", u("attention.key_length")},
      {"intermediate_size", n_ff[0]},
      {"use_double_wide_mlp", true},
      {"num_kv_shared_layers", shared},
      {"hidden_size_per_layer_input", per_layer > 0 ? ordered_json(per_layer) : ordered_json()},
      {"vocab_size_per_layer_input", vocab},
      {"max_position_embeddings", u("context_length")},
      {"rms_norm_eps", f("attention.layer_norm_rms_epsilon")},
      {"layer_types", types},
      {"sliding_window", u("attention.sliding_window")},
      {"rope_parameters",
       {{"full_attention",
         {{"partial_rotary_factor", 1.0},
          {"rope_theta", f("rope.freq_base")},
          {"rope_type", "proportional"}}},
        {"sliding_attention",
         {{"rope_theta", f("rope.freq_base_swa")}, {"rope_type", "default"}}}}},
      {"final_logit_softcapping", f("final_logit_softcapping")},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"attention_bias", false},
      {"attention_k_eq_v", false},
      {"enable_moe_block", moe},
      {"num_experts", moe ? ordered_json(u("expert_count")) : ordered_json()},
      {"top_k_experts", moe ? ordered_json(u("expert_used_count")) : ordered_json()},
      {"expert_intermediate_size",
       moe ? ordered_json(u("expert_feed_forward_length")) : ordered_json()},
      {"tie_word_embeddings", true},
      {"vocab_size", vocab},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
  return config;
}

// The folder of `c` (built once per test process and case).
const std::string& FolderOf(const Gemma4Case& c) {
  static std::map<std::string, std::string> folders;
  auto [it, added] = folders.try_emplace(c.name);
  if (!added) return it->second;
  const std::string dir = testing::TempDir() + "/hf-gemma4-" + c.name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto gguf = GgufFile::Open(GgufOf(c));
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  ordered_json config = TextConfigOf(*gguf);
  if (c.multimodal) {
    config = {{"architectures", {"Gemma4ForConditionalGeneration"}},
              {"model_type", "gemma4"},
              {"text_config", config},
              {"vision_config", {{"model_type", "gemma4_vision"}, {"hidden_size", 4}}},
              {"audio_config", {{"model_type", "gemma4_audio"}, {"hidden_size", 4}}}};
  } else {
    config["architectures"] = {"Gemma4ForCausalLM"};
  }
  EXPECT_TRUE(testing::WriteText(dir + "/config.json", config.dump(2)));
  WriteWeights(c, *gguf, dir);
  EXPECT_TRUE(testing::WriteText(dir + "/tokenizer.json", testing::SpmTokenizerJson(*gguf).dump()));
  it->second = dir;
  return it->second;
}

// 20 tokens: past the window of 8, through every layer kind.
const std::vector<int32_t> kTokens = {1,   72, 301, 15,  499, 260, 33,  87, 144, 410,
                                      222, 9,  356, 480, 61,  190, 305, 17, 444, 128};

class HfGemma4Test : public ::testing::TestWithParam<Gemma4Case> {};

TEST_P(HfGemma4Test, FolderHoldsTheGgufTensorsAndKeys) {
  auto view = HfFolder::Open(FolderOf(GetParam()));
  ASSERT_TRUE(view.ok()) << view.message();
  auto file = GgufFile::Open(GgufOf(GetParam()));
  ASSERT_TRUE(file.ok()) << file.message();
  testing::ExpectSameTensors(*view, *file);
  testing::ExpectSameArchKeys(*view, *file, "gemma4");
}

TEST_P(HfGemma4Test, FolderGivesTheGgufLogitsBitForBit) {
  auto gguf = testing::LoadPathOrDie(GgufOf(GetParam()));
  auto folder = testing::LoadPathOrDie(FolderOf(GetParam()));
  ASSERT_TRUE(gguf && folder);
  EXPECT_EQ(folder->config().arch, "gemma4");
  EXPECT_EQ(folder->kv_spec().readers, gguf->kv_spec().readers);
  testing::ExpectSameBits(testing::AllPositionLogits(*folder, kTokens),
                          testing::AllPositionLogits(*gguf, kTokens));
}

TEST_P(HfGemma4Test, ConvertedFolderIsTheGguf) {
  const std::string out = testing::TempDir() + "/hf-gemma4-" + GetParam().name + ".gguf";
  const std::string args = "convert -m '" + FolderOf(GetParam()) + "' -o '" + out + "' --type f32";
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve(args, &printed, &errors), 0) << args << ": " << errors;
  auto converted_file = GgufFile::Open(out);
  auto file = GgufFile::Open(GgufOf(GetParam()));
  ASSERT_TRUE(converted_file.ok() && file.ok()) << converted_file.message();
  testing::ExpectSameTensors(*converted_file, *file);
  testing::ExpectSameArchKeys(*converted_file, *file, "gemma4");
  auto gguf = testing::LoadPathOrDie(GgufOf(GetParam()));
  auto converted = testing::LoadPathOrDie(out);
  ASSERT_TRUE(gguf && converted);
  testing::ExpectSameBits(testing::AllPositionLogits(*converted, kTokens),
                          testing::AllPositionLogits(*gguf, kTokens));
  fs::remove(out);  // the mapping stays valid until `converted` is destroyed
}

INSTANTIATE_TEST_SUITE_P(Presets, HfGemma4Test, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A small text config of E2B's layout: layers S S G S S G, the last two reading layers 1 and 2.
ordered_json SmallConfig() {
  return {{"architectures", {"Gemma4ForCausalLM"}},
          {"hidden_size", 64},
          {"num_hidden_layers", 6},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 1},
          {"head_dim", 32},
          {"global_head_dim", 64},
          {"intermediate_size", 128},
          {"num_kv_shared_layers", 3},
          {"layer_types",
           {"sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
            "sliding_attention", "full_attention"}},
          {"sliding_window", 16},
          {"vocab_size", 512},
          {"rope_parameters",
           {{"full_attention",
             {{"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}, {"rope_type", "proportional"}}},
            {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}}};
}

// llama.cpp's converter: [1.0] * int(D f / 2) + [1e30] * (D / 2 - that), D the full layers' head.
TEST(HfGemma4Keys, ProportionalRopeGivesRopeFreqs) {
  const std::vector<float> e2b = ProportionalRopeFreqs(512, 0.25);  // E2B: 64 turned of 256
  ASSERT_EQ(e2b.size(), 256u);
  EXPECT_EQ(std::count(e2b.begin(), e2b.end(), 1.0f), 64);
  EXPECT_EQ(e2b[63], 1.0f);
  EXPECT_EQ(e2b[64], 1e30f);
  EXPECT_EQ(e2b[255], 1e30f);
  const std::vector<float> all = ProportionalRopeFreqs(128, 1.0);
  EXPECT_EQ(all, std::vector<float>(64, 1.0f));
  auto c = ParseHfConfig(SmallConfig().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->rope_freqs, ProportionalRopeFreqs(64, 0.25));
  EXPECT_EQ(std::count(c->rope_freqs.begin(), c->rope_freqs.end(), 1.0f), 8);
}

// E2B's shape (kvserve's gemma4-e2b preset) in the keys the converter writes.
TEST(HfGemma4Keys, E2bKeysAsTheConverterWritesThem) {
  ordered_json j = SmallConfig();
  j["hidden_size"] = 1536;
  j["num_hidden_layers"] = 35;
  j["num_attention_heads"] = 8;
  j["head_dim"] = 256;
  j["global_head_dim"] = 512;
  j["intermediate_size"] = 6144;
  j["num_kv_shared_layers"] = 20;
  j["use_double_wide_mlp"] = true;
  j["hidden_size_per_layer_input"] = 256;
  j["vocab_size_per_layer_input"] = 512;
  j["sliding_window"] = 512;
  j["final_logit_softcapping"] = 30.0;
  j["num_global_key_value_heads"] = nullptr;
  j["enable_moe_block"] = false;
  j["num_experts"] = nullptr;
  j["layer_types"] = ordered_json::array();
  for (int i = 0; i < 35; ++i)
    j["layer_types"].push_back(i % 5 == 4 ? "full_attention" : "sliding_attention");
  auto c = ParseHfConfig(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  GgufWriter w;
  AddHfHyperParameters(*c, "e2b", w);
  const std::vector<uint8_t> image = w.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "e2b");
  ASSERT_TRUE(file.ok()) << file.message();
  auto u = [&](const char* key) { return file->GetUint(std::string("gemma4.") + key).value(); };
  EXPECT_EQ(u("attention.key_length"), 512u);
  EXPECT_EQ(u("attention.value_length"), 512u);
  EXPECT_EQ(u("attention.key_length_swa"), 256u);
  EXPECT_EQ(u("rope.dimension_count"), 512u);
  EXPECT_EQ(u("rope.dimension_count_swa"), 256u);
  EXPECT_EQ(u("attention.shared_kv_layers"), 20u);
  EXPECT_EQ(u("embedding_length_per_layer_input"), 256u);
  EXPECT_EQ(u("attention.sliding_window"), 512u);
  EXPECT_EQ(u("attention.head_count_kv"), 1u);
  EXPECT_EQ(file->GetFloat("gemma4.rope.freq_base").value(), 1e6);
  EXPECT_EQ(file->GetFloat("gemma4.rope.freq_base_swa").value(), 10000.0);
  EXPECT_EQ(file->GetFloat("gemma4.final_logit_softcapping").value(), 30.0);
  EXPECT_EQ(file->Find("gemma4.expert_count"), nullptr);
  std::vector<int64_t> n_ff(15, 6144);
  n_ff.resize(35, 2 * 6144);  // the 20 shared layers' double-wide MLP
  EXPECT_EQ(file->GetIntArray("gemma4.feed_forward_length").value(), n_ff);
  const GgufValue* pattern = file->Find("gemma4.attention.sliding_window_pattern");
  ASSERT_NE(pattern, nullptr);
  ASSERT_EQ(pattern->array_type, GgufValueType::kBool);
  ASSERT_EQ(pattern->array_size, 35u);
  EXPECT_EQ(pattern->array_data[4], 0);  // layer 4 global, 5 sliding
  EXPECT_EQ(pattern->array_data[5], 1);
  EXPECT_EQ(c->rope_freqs.size(), 256u);
}

// What kvserve's gemma4 does not compute, and what the converter requires, refused by key.
TEST(HfGemma4Keys, ConfigsKvserveCannotComputeAreRefusedByKey) {
  auto error = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  const ordered_json base = SmallConfig();
  ASSERT_TRUE(ParseHfConfig(base.dump(), "config.json").ok());
  ordered_json j = base;
  j["attention_k_eq_v"] = true;
  EXPECT_THAT(error(j), HasSubstr("'attention_k_eq_v' = true is not supported"));
  j = base;
  j["num_global_key_value_heads"] = 2;
  EXPECT_THAT(error(j), HasSubstr("'num_global_key_value_heads' = 2 is not supported"));
  j["num_global_key_value_heads"] = 1;  // the same count for every layer
  EXPECT_TRUE(ParseHfConfig(j.dump(), "config.json").ok());
  j = base;
  j["per_layer_config"] = {{"2", {{"head_dim", 64}}}};
  EXPECT_THAT(error(j), HasSubstr("'per_layer_config'"));
  j = base;
  j["rope_parameters"]["full_attention"]["rope_type"] = "default";
  EXPECT_THAT(
      error(j),
      HasSubstr("'rope_parameters.full_attention.rope_type' = \"default\" is not supported"));
  j = base;
  j["rope_parameters"]["full_attention"]["factor"] = 8.0;
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.full_attention.factor' = 8.0"));
  j = base;
  j["rope_parameters"]["full_attention"].erase("partial_rotary_factor");
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.full_attention.partial_rotary_factor'"));
  j = base;
  j["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5;
  EXPECT_THAT(error(j),
              HasSubstr("'rope_parameters.sliding_attention.partial_rotary_factor' = 0.5"));
  j = base;
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.sliding_attention.rope_type' = \"linear\""));
  j = base;
  j.erase("rope_parameters");
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.full_attention.rope_type'"));
  j = base;
  j["layer_types"][2] = "chunked_attention";
  EXPECT_THAT(error(j), HasSubstr("'layer_types'"));
  j = base;
  j["num_kv_shared_layers"] = 2;  // the last layers with a cache would be S S, not S G
  EXPECT_THAT(error(j), HasSubstr("'num_kv_shared_layers' = 2 is not supported"));
  j = base;
  j.erase("global_head_dim");
  EXPECT_THAT(error(j), HasSubstr("missing required key 'global_head_dim'"));
  j = base;
  j.erase("layer_types");
  EXPECT_THAT(error(j), HasSubstr("missing required key 'layer_types'"));
  j = base;
  j["hidden_activation"] = "gelu";
  EXPECT_THAT(error(j), HasSubstr("'hidden_activation' = \"gelu\""));
  j = base;
  j["attn_logit_softcapping"] = 50.0;
  EXPECT_THAT(error(j), HasSubstr("'attn_logit_softcapping' = 50.0"));
  j = base;
  j["hidden_size_per_layer_input"] = 16;
  j["vocab_size_per_layer_input"] = 1024;
  EXPECT_THAT(error(j), HasSubstr("'vocab_size_per_layer_input' = 1024"));
  j = base;
  j["enable_moe_block"] = true;
  j["num_experts"] = 4;
  EXPECT_THAT(error(j), HasSubstr("missing required key 'num_experts_per_tok'"));
}

class RemoveFolders : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const Gemma4Case& c : kCases) fs::remove_all(testing::TempDir() + "/hf-gemma4-" + c.name);
  }
};
const auto* const kRemoveFolders = ::testing::AddGlobalTestEnvironment(new RemoveFolders);

}  // namespace
}  // namespace kvserve
