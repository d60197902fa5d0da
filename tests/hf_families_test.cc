// Hugging Face folders of every family kvserve runs (Llama 3, Mistral, Qwen 2, Qwen 3, Qwen 3 MoE,
// Phi-3, Gemma 2, Gemma 3), written from the random-weight GGUF fixtures in ../shared/models/arch
// by undoing what llama.cpp's converter does (q/k rows back to rotate-half order, Gemma's norm
// weights minus 1, experts unstacked, rope_freqs dropped and described by rope_scaling instead):
// HfFolder gives the fixture's tensors byte for byte and its family metadata, the model loaded
// from the folder gives the fixture's logits bit for bit, and so does `kvserve convert` of it.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "support/test_backend.h"
#include "util/half.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
using testing::ModelPath;
namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct FamilyCase {
  const char* name;          // test name
  const char* gguf;          // under ../shared/models
  const char* reference;     // prompt tokens: ../shared/reference/<reference>.json
  const char* architecture;  // config.json "architectures"
  const char* model_type;
  const char* convert_type;  // kvserve convert --type
  enum Layout {
    kPlain,
    kFusedExperts,  // transformers 5's mlp.experts.gate_up_proj / down_proj
    kMultimodal,    // Gemma3ForConditionalGeneration: text_config, language_model. names
  } layout = kPlain;
};

const FamilyCase kCases[] = {
    {"Llama3", "arch/llama3-f32.gguf", "arch/llama3-f32", "LlamaForCausalLM", "llama", "f32"},
    {"Mistral", "stories260K.gguf", "stories260K-a", "MistralForCausalLM", "mistral", "f32"},
    {"Qwen2", "arch/qwen2-f32.gguf", "arch/qwen2-f32", "Qwen2ForCausalLM", "qwen2", "f32"},
    {"Qwen3", "arch/qwen3-f32.gguf", "arch/qwen3-f32", "Qwen3ForCausalLM", "qwen3", "f32"},
    {"Qwen3F16", "arch/qwen3-f16.gguf", "arch/qwen3-f16", "Qwen3ForCausalLM", "qwen3", "f16"},
    {"Qwen3Moe", "arch/qwen3moe-f32.gguf", "arch/qwen3moe-f32", "Qwen3MoeForCausalLM", "qwen3_moe",
     "f32"},
    {"Phi3", "arch/phi3-f32.gguf", "arch/phi3-f32", "Phi3ForCausalLM", "phi3", "f32"},
    {"Phi3F16", "arch/phi3-f16.gguf", "arch/phi3-f16", "Phi3ForCausalLM", "phi3", "f16"},
    {"Gemma2", "arch/gemma2-f32.gguf", "arch/gemma2-f32", "Gemma2ForCausalLM", "gemma2", "f32"},
    {"Gemma2F16", "arch/gemma2-f16.gguf", "arch/gemma2-f16", "Gemma2ForCausalLM", "gemma2", "f16"},
    {"Gemma3", "arch/gemma3-f32.gguf", "arch/gemma3-f32", "Gemma3ForCausalLM", "gemma3_text",
     "f32"},
    {"Qwen3MoeFused", "arch/qwen3moe-f32.gguf", "arch/qwen3moe-f32", "Qwen3MoeForCausalLM",
     "qwen3_moe", "f32", FamilyCase::kFusedExperts},
    {"Gemma3Multimodal", "arch/gemma3-f32.gguf", "arch/gemma3-f32",
     "Gemma3ForConditionalGeneration", "gemma3_text", "f32", FamilyCase::kMultimodal},
};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.name; }

bool IsGemma(const FamilyCase& c) { return std::string(c.model_type).rfind("gemma", 0) == 0; }

// GGUF "blk.N.<suffix>" -> HF "model.layers.N.<name>", written here apart from the loader's table.
const std::map<std::string, std::string>& HfLayerNames(const FamilyCase& c) {
  static const std::map<std::string, std::string> kCommon = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
  };
  static const std::map<std::string, std::string> kPhi3 = [] {
    auto m = kCommon;
    m["ffn_up.weight"] = "mlp.gate_up_proj.weight";
    return m;
  }();
  static const std::map<std::string, std::string> kGemma = [] {
    auto m = kCommon;
    m["post_attention_norm.weight"] = "post_attention_layernorm.weight";
    m["ffn_norm.weight"] = "pre_feedforward_layernorm.weight";
    m["post_ffw_norm.weight"] = "post_feedforward_layernorm.weight";
    return m;
  }();
  if (std::string(c.model_type) == "phi3") return kPhi3;
  return IsGemma(c) ? kGemma : kCommon;
}

// An f32 w - 1 whose f32 sum with 1 is w again (Gemma's converter adds 1 to the HF weight).
float MinusOne(float w) {
  float x = w - 1.0f;
  for (int step = 0; step < 4 && x + 1.0f != w; ++step) {
    x = std::nextafter(x, x + 1.0f < w ? INFINITY : -INFINITY);
  }
  EXPECT_EQ(x + 1.0f, w) << "no f32 x with x + 1 == " << w;
  return x;
}

const char* DtypeName(GgmlType type) {
  EXPECT_TRUE(type == GgmlType::kF32 || type == GgmlType::kF16);
  return type == GgmlType::kF32 ? "F32" : "F16";
}

// The fixture's tensors under HF names in two shards (layer 0 and the rest), with an index.
void WriteWeights(const FamilyCase& c, const GgufFile& gguf, const std::string& dir, int n_heads,
                  int n_kv_heads) {
  testing::SafetensorsBuilder shards[2];
  ordered_json weight_map = ordered_json::object();
  const char* kShardNames[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  const bool llama = std::string(c.model_type) == "llama" || std::string(c.model_type) == "mistral";
  auto add = [&](int shard, const std::string& name, const TensorInfo& t,
                 std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    shards[shard].Add(name, DtypeName(t.type), shape, std::move(bytes));
    weight_map[name] = kShardNames[shard];
  };
  // The multimodal layout's names, both spellings transformers has used.
  const bool multimodal = c.layout == FamilyCase::kMultimodal;
  const std::string global = multimodal ? "model.language_model." : "model.";
  const std::string layers = multimodal ? "language_model.model.layers." : "model.layers.";
  if (multimodal) {  // towers the text model leaves out
    add(0, "vision_tower.vision_model.post_layernorm.weight", gguf.tensors()[1], {8},
        std::vector<uint8_t>(32, 0));
    add(0, "multi_modal_projector.mm_soft_emb_norm.weight", gguf.tensors()[1], {8},
        std::vector<uint8_t>(32, 0));
  }
  std::map<std::string, std::vector<uint8_t>> pending_gate;  // fused: layer -> gate bytes
  for (const TensorInfo& t : gguf.tensors()) {
    std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (t.name == "rope_freqs.weight") continue;  // config.json's rope_scaling gives it
    const bool norm = t.name.ends_with("norm.weight");
    if (IsGemma(c) && norm) {
      EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
      auto* v = reinterpret_cast<float*>(bytes.data());
      for (uint64_t i = 0; i < t.n_elements; ++i) v[i] = MinusOne(v[i]);
    }
    if (t.name == "token_embd.weight") {
      add(0, global + "embed_tokens.weight", t, shape, bytes);
      continue;
    }
    if (t.name == "output_norm.weight") {
      add(0, global + "norm.weight", t, shape, bytes);
      continue;
    }
    if (t.name == "output.weight") {
      add(0, "lm_head.weight", t, shape, bytes);
      continue;
    }
    ASSERT_EQ(t.name.rfind("blk.", 0), 0u) << t.name;
    const size_t dot = t.name.find('.', 4);
    const std::string layer = t.name.substr(4, dot - 4), suffix = t.name.substr(dot + 1);
    const std::string prefix = layers + layer + ".";
    const int shard = layer == "0" ? 0 : 1;
    if (suffix.ends_with("_exps.weight") && c.layout == FamilyCase::kFusedExperts) {
      const std::string w = suffix.substr(4, suffix.find('_', 4) - 4);  // gate, up, down
      if (w == "down") {
        add(shard, prefix + "mlp.experts.down_proj", t, shape, std::move(bytes));
      } else if (w == "gate") {
        pending_gate[layer] = std::move(bytes);
      } else {  // [n_expert, 2 n_ff, n_embd]: each expert's gate rows, then its up rows
        ASSERT_EQ(pending_gate.count(layer), 1u) << "gate before up in the fixture";
        const std::vector<uint8_t>& gate = pending_gate[layer];
        const uint64_t per_expert = t.n_bytes / static_cast<uint64_t>(t.dims[2]);
        std::vector<uint8_t> fused;
        for (int64_t e = 0; e < t.dims[2]; ++e) {
          fused.insert(fused.end(), gate.begin() + e * per_expert,
                       gate.begin() + (e + 1) * per_expert);
          fused.insert(fused.end(), bytes.begin() + e * per_expert,
                       bytes.begin() + (e + 1) * per_expert);
        }
        add(shard, prefix + "mlp.experts.gate_up_proj", t, {t.dims[2], 2 * t.dims[1], t.dims[0]},
            std::move(fused));
      }
      continue;
    }
    if (suffix.ends_with("_exps.weight")) {  // [n_expert, rows, cols] -> one matrix per expert
      const std::string w = suffix.substr(4, suffix.find('_', 4) - 4);  // gate, up, down
      const uint64_t per_expert = t.n_bytes / static_cast<uint64_t>(t.dims[2]);
      for (int64_t e = 0; e < t.dims[2]; ++e) {
        add(shard, prefix + "mlp.experts." + std::to_string(e) + "." + w + "_proj.weight", t,
            {t.dims[1], t.dims[0]},
            std::vector<uint8_t>(bytes.begin() + e * per_expert,
                                 bytes.begin() + (e + 1) * per_expert));
      }
      continue;
    }
    const auto& names = HfLayerNames(c);
    auto it = names.find(suffix);
    ASSERT_NE(it, names.end()) << "no HF name for " << t.name;
    if (llama && (suffix == "attn_q.weight" || suffix == "attn_k.weight")) {
      // GGML row h*d + 2i + j came from HF row h*d + j*d/2 + i.
      const int heads = suffix == "attn_q.weight" ? n_heads : n_kv_heads;
      const int64_t n_in = t.dims[0], d = t.dims[1] / heads, half = d / 2;
      const uint64_t row = static_cast<uint64_t>(n_in) * (t.type == GgmlType::kF32 ? 4 : 2);
      std::vector<uint8_t> out(bytes.size());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          for (int64_t j = 0; j < 2; ++j) {
            std::memcpy(out.data() + (h * d + j * half + i) * row,
                        bytes.data() + (h * d + 2 * i + j) * row, row);
          }
        }
      }
      bytes = std::move(out);
    }
    add(shard, prefix + it->second, t, shape, std::move(bytes));
  }
  ASSERT_TRUE(shards[0].WriteFile(dir + "/" + kShardNames[0]));
  ASSERT_TRUE(shards[1].WriteFile(dir + "/" + kShardNames[1]));
  ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  ASSERT_TRUE(testing::WriteText(dir + "/model.safetensors.index.json", index.dump(2)));
}

// config.json of the fixture, in the family's Hugging Face keys.
ordered_json ConfigOf(const FamilyCase& c, const GgufFile& gguf) {
  const std::string a = std::string(gguf.GetString("general.architecture").value()) + ".";
  auto u = [&](const std::string& key) { return gguf.GetUint(a + key).value(); };
  auto f = [&](const std::string& key) { return gguf.GetFloat(a + key).value(); };
  const std::string type = c.model_type;
  ordered_json config = {
      {"architectures", {c.architecture}},
      {"model_type", c.model_type},
      {"hidden_size", u("embedding_length")},
      {"num_hidden_layers", u("block_count")},
      {"num_attention_heads", u("attention.head_count")},
      {"num_key_value_heads", u("attention.head_count_kv")},
      {"intermediate_size", u("feed_forward_length")},
      {"max_position_embeddings", u("context_length")},
      {"rms_norm_eps", f("attention.layer_norm_rms_epsilon")},
      {"rope_theta", gguf.GetFloatOr(a + "rope.freq_base", 10000.0).value()},
      {"hidden_act", IsGemma(c) ? "gelu_pytorch_tanh" : "silu"},
      {"tie_word_embeddings", gguf.FindTensor("output.weight") == nullptr},
      {"vocab_size", gguf.GetStringArray("tokenizer.ggml.tokens")->size()},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", "float32"},
  };
  if (gguf.Find(a + "attention.key_length")) config["head_dim"] = u("attention.key_length");
  if (type == "llama") {
    // The values ../shared/reference/arch/README.md gives for the fixture's rope_freqs.
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 256}};
  } else if (type == "mistral") {
    config["sliding_window"] = nullptr;
  } else if (type == "qwen2" || type == "qwen3") {
    config["use_sliding_window"] = false;
    config["sliding_window"] = 4096;  // read only with use_sliding_window
  } else if (type == "qwen3_moe") {
    config["num_experts"] = u("expert_count");
    config["num_experts_per_tok"] = u("expert_used_count");
    config["moe_intermediate_size"] = u("expert_feed_forward_length");
    config["norm_topk_prob"] = true;
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = ordered_json::array();
  } else if (type == "phi3") {
    config["original_max_position_embeddings"] = u("rope.scaling.original_context_length");
    config["rope_scaling"] = nullptr;
  } else if (type == "gemma2") {
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["query_pre_attn_scalar"] = u("attention.key_length");
    config["attn_logit_softcapping"] = f("attn_logit_softcapping");
    config["final_logit_softcapping"] = f("final_logit_softcapping");
    config["sliding_window"] = u("attention.sliding_window");
  } else if (type == "gemma3_text") {
    config["query_pre_attn_scalar"] = u("attention.key_length");
    config["sliding_window"] = u("attention.sliding_window");
    config["rope_local_base_freq"] = f("rope.freq_base_swa");
    config["rope_scaling"] = {{"rope_type", gguf.GetString(a + "rope.scaling.type").value()},
                              {"factor", f("rope.scaling.factor")}};
    config["attn_logit_softcapping"] = nullptr;
    config["final_logit_softcapping"] = nullptr;
    // transformers 4.53+ writes layer_types; the pattern is what the loader derives from it.
    const uint64_t pattern = u("attention.sliding_window_pattern");
    ordered_json layer_types = ordered_json::array();
    for (uint64_t i = 0; i < u("block_count"); ++i) {
      layer_types.push_back(i % pattern == pattern - 1 ? "full_attention" : "sliding_attention");
    }
    config["layer_types"] = layer_types;
  }
  return config;
}

// The folder of `c` (built once per test process and case).
const std::string& FolderOf(const FamilyCase& c) {
  static std::map<std::string, std::string> folders;
  auto [it, added] = folders.try_emplace(c.name);
  if (!added) return it->second;
  const std::string dir = testing::TempDir() + "/hf-family-" + c.name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto gguf = GgufFile::Open(ModelPath(c.gguf));
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  const ordered_json config = ConfigOf(c, *gguf);
  if (c.layout == FamilyCase::kMultimodal) {
    // The text model's keys under text_config, as Gemma 3 4B-27B configs have them.
    ordered_json text = config;
    text.erase("architectures");
    text["model_type"] = "gemma3_text";
    const ordered_json outer = {
        {"architectures", {c.architecture}},
        {"model_type", "gemma3"},
        {"text_config", text},
        {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 8}}},
        {"mm_tokens_per_image", 256},
    };
    EXPECT_TRUE(testing::WriteText(dir + "/config.json", outer.dump(2)));
  } else {
    EXPECT_TRUE(testing::WriteText(dir + "/config.json", config.dump(2)));
  }
  WriteWeights(c, *gguf, dir, config["num_attention_heads"].get<int>(),
               config["num_key_value_heads"].get<int>());
  EXPECT_TRUE(testing::WriteText(dir + "/tokenizer.json", testing::SpmTokenizerJson(*gguf).dump()));
  it->second = dir;
  return it->second;
}

std::unique_ptr<Model> LoadOrDie(const std::string& path) {
  auto model = LoadModel(path, TestBackend());
  EXPECT_TRUE(model.ok()) << model.message();
  return model.ok() ? std::move(model).value() : nullptr;
}

std::vector<int32_t> PromptTokens(const std::string& reference) {
  const auto json = nlohmann::json::parse(ReadText(testing::ReferencePath(reference + ".json")));
  return json["prompt_tokens"].get<std::vector<int32_t>>();
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  size_t first_difference = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      first_difference = i;
      break;
    }
  }
  EXPECT_EQ(first_difference, a.size()) << "first difference at " << first_difference << ": "
                                        << a[first_difference] << " vs " << b[first_difference];
}

std::string ScalarString(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kString:
      return "'" + std::string(v.str) + "'";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return "float " + std::to_string(v.f);
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return "int " + std::to_string(v.i);
    case GgufValueType::kArray:
      return "array";
    default:
      return "uint " + std::to_string(v.u);
  }
}

// Every tensor of the fixture, with its name, shape, type and bytes, and nothing else.
void ExpectSameTensors(const GgufFile& mine, const GgufFile& fixture) {
  EXPECT_EQ(mine.tensors().size(), fixture.tensors().size());
  for (const TensorInfo& t : fixture.tensors()) {
    const TensorInfo* m = mine.FindTensor(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(m->dims, t.dims) << t.name;
    EXPECT_EQ(m->type, t.type) << t.name;
    ASSERT_EQ(m->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(m->data, t.data, t.n_bytes), 0) << t.name;
  }
}

// Every "<arch>." key of the fixture, with the same type and value.
void ExpectFamilyMetadata(const GgufFile& mine, const GgufFile& fixture) {
  const std::string arch(fixture.GetString("general.architecture").value());
  EXPECT_EQ(mine.GetString("general.architecture").value(), arch);
  for (const auto& [key, value] : fixture.metadata()) {
    if (key.rfind(arch + ".", 0) != 0) continue;
    const GgufValue* m = mine.Find(key);
    ASSERT_NE(m, nullptr) << key;
    EXPECT_EQ(ScalarString(*m), ScalarString(value)) << key;
  }
}

class HfFamilyTest : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(HfFamilyTest, FolderHoldsTheGgufTensorsAndFamilyKeys) {
  auto view = HfFolder::Open(FolderOf(GetParam()));
  ASSERT_TRUE(view.ok()) << view.message();
  auto fixture = GgufFile::Open(ModelPath(GetParam().gguf));
  ASSERT_TRUE(fixture.ok());
  ExpectSameTensors(*view, *fixture);
  ExpectFamilyMetadata(*view, *fixture);
}

TEST_P(HfFamilyTest, FolderGivesTheGgufLogitsBitForBit) {
  auto gguf = LoadOrDie(ModelPath(GetParam().gguf));
  auto folder = LoadOrDie(FolderOf(GetParam()));
  ASSERT_TRUE(gguf && folder);
  EXPECT_EQ(folder->config().arch, gguf->config().arch);
  EXPECT_EQ(folder->config().tied_output, gguf->config().tied_output);
  const std::vector<int32_t> tokens = PromptTokens(GetParam().reference);
  ExpectSameBits(testing::AllPositionLogits(*folder, tokens),
                 testing::AllPositionLogits(*gguf, tokens));
}

// `kvserve convert -m in -o <temp>/<name>.gguf --type type`; the output's path.
std::string ConvertWithCli(const std::string& in, const char* type, const std::string& name) {
  const std::string out = testing::TempDir() + "/" + name + ".gguf";
  const std::string args = "convert -m '" + in + "' -o '" + out + "' --type " + type;
  std::string printed, errors;
  EXPECT_EQ(testing::RunKvserve(args, &printed, &errors), 0) << args << ": " << errors;
  return out;
}

TEST_P(HfFamilyTest, ConvertedFolderGivesTheSameLogits) {
  const std::string out = ConvertWithCli(FolderOf(GetParam()), GetParam().convert_type,
                                         std::string("hf-family-") + GetParam().name);
  auto converted_file = GgufFile::Open(out);
  auto fixture = GgufFile::Open(ModelPath(GetParam().gguf));
  ASSERT_TRUE(converted_file.ok() && fixture.ok()) << converted_file.message();
  ExpectSameTensors(*converted_file, *fixture);
  ExpectFamilyMetadata(*converted_file, *fixture);
  auto gguf = LoadOrDie(ModelPath(GetParam().gguf));
  auto converted = LoadOrDie(out);
  ASSERT_TRUE(gguf && converted);
  const std::vector<int32_t> tokens = PromptTokens(GetParam().reference);
  ExpectSameBits(testing::AllPositionLogits(*converted, tokens),
                 testing::AllPositionLogits(*gguf, tokens));
  fs::remove(out);  // the mapping stays valid until `converted` is destroyed
}

// A K-quant mix of the folder is the same mix of the GGUF fixture, byte for byte.
TEST_P(HfFamilyTest, QuantizedFolderIsTheQuantizedGguf) {
  const std::string name = GetParam().name;
  auto from_folder = GgufFile::Open(ConvertWithCli(FolderOf(GetParam()), "q4_k_m", name + "-hf"));
  auto from_gguf = GgufFile::Open(ConvertWithCli(ModelPath(GetParam().gguf), "q4_k_m", name));
  ASSERT_TRUE(from_folder.ok() && from_gguf.ok()) << from_folder.message();
  ExpectSameTensors(*from_folder, *from_gguf);
  EXPECT_EQ(from_folder->GetInt("general.file_type").value(), 15);  // LLAMA_FTYPE Q4_K_M
}

// Through the engine (`kvserve run`): the folder's greedy tokens are the fixture's.
TEST_P(HfFamilyTest, RunCommandGeneratesTheGgufTokens) {
  std::string tokens;
  for (int32_t t : PromptTokens(GetParam().reference)) {
    tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
  }
  auto run = [&](const std::string& model) {
    const std::string out = testing::TempDir() + "/hf-family-run.json";
    const std::string command =
        testing::KvserveBinary() + " run -m '" + model + "' --prompt-tokens " + tokens +
        " -n 6 --temp 0 --ignore-eos --output-format json >'" + out + "' 2>/dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    auto json = nlohmann::json::parse(ReadText(out), nullptr, false);
    fs::remove(out);
    EXPECT_TRUE(json.is_object() && json.contains("tokens")) << command;
    return json.is_object() && json.contains("tokens") ? json["tokens"].get<std::vector<int32_t>>()
                                                       : std::vector<int32_t>();
  };
  const std::vector<int32_t> from_folder = run(FolderOf(GetParam()));
  EXPECT_EQ(from_folder.size(), 6u);
  EXPECT_EQ(from_folder, run(ModelPath(GetParam().gguf)));
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The llama3 rule gives the fixture's rope_freqs from the README's parameters.
TEST(HfFamiliesTest, Llama3RopeFreqsAsTheConverterComputesThem) {
  auto fixture = GgufFile::Open(ModelPath("arch/llama3-f32.gguf"));
  ASSERT_TRUE(fixture.ok());
  const TensorInfo* freqs = fixture->FindTensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  HfConfig c;
  c.head_dim = 64;
  c.rope_theta = 500000.0;
  c.rope_scaling = HfRopeScaling::kLlama3;
  c.rope_factor = 8.0;
  c.rope_original_ctx = 256;
  const std::vector<float> mine = Llama3RopeFreqs(c);
  ASSERT_EQ(mine.size() * 4, freqs->n_bytes);
  EXPECT_EQ(std::memcmp(mine.data(), freqs->data, freqs->n_bytes), 0);
  EXPECT_EQ(mine.front(), 1.0f);  // high frequencies unscaled, low ones by the factor
  EXPECT_EQ(mine.back(), 8.0f);
  // Llama 3.1's own values (factor 8, 1, 4, 8192 positions, base 500000, head_dim 128): the
  // first 45 pairs unscaled... and every pair past the smooth band divided by 8.
  c.head_dim = 128;
  c.rope_original_ctx = 8192;
  const std::vector<float> llama31 = Llama3RopeFreqs(c);
  ASSERT_EQ(llama31.size(), 64u);
  EXPECT_EQ(llama31[0], 1.0f);
  EXPECT_EQ(llama31[63], 8.0f);
  for (size_t i = 1; i < llama31.size(); ++i) EXPECT_GE(llama31[i], llama31[i - 1]) << i;
}

const char* const kQwen3Moe = R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 32, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
    "vocab_size": 10, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "norm_topk_prob": true})";

// What kvserve does not compute exactly is refused, naming the key.
TEST(HfFamiliesTest, ConfigsKvserveCannotComputeAreRefusedByKey) {
  auto error = [](const nlohmann::json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  const auto moe = nlohmann::json::parse(kQwen3Moe);
  ASSERT_TRUE(ParseHfConfig(moe.dump(), "config.json").ok());
  auto j = moe;
  j["norm_topk_prob"] = false;
  EXPECT_THAT(error(j), HasSubstr("'norm_topk_prob' = false is not supported"));
  j.erase("norm_topk_prob");  // Qwen3MoeConfig's default is false
  EXPECT_THAT(error(j), HasSubstr("'norm_topk_prob' is absent"));
  j = moe;
  j["mlp_only_layers"] = {1};
  EXPECT_THAT(error(j), HasSubstr("'mlp_only_layers' = [1]"));
  j = moe;
  j["num_experts_per_tok"] = 9;
  EXPECT_THAT(error(j), HasSubstr("'num_experts_per_tok' = 9"));
  j = moe;
  j["use_sliding_window"] = true;
  EXPECT_THAT(error(j), HasSubstr("'use_sliding_window' = true"));
  j = moe;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(error(j), HasSubstr("'rope_scaling.rope_type' = \"yarn\" is not supported"));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 4.0}};  // llama3 is Llama's only
  EXPECT_THAT(error(j), HasSubstr("'rope_scaling.rope_type' = \"llama3\""));

  auto phi3 = moe;
  phi3["architectures"] = {"Phi3ForCausalLM"};
  phi3["original_max_position_embeddings"] = 32;
  ASSERT_TRUE(ParseHfConfig(phi3.dump(), "config.json").ok());
  j = phi3;
  j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  EXPECT_THAT(error(j), HasSubstr("'rope_scaling.type' = \"longrope\""));
  j = phi3;
  j["partial_rotary_factor"] = 0.75;
  EXPECT_THAT(error(j), HasSubstr("'partial_rotary_factor' = 0.75"));
  j = phi3;
  j.erase("original_max_position_embeddings");
  EXPECT_THAT(error(j), HasSubstr("missing required key 'original_max_position_embeddings'"));

  auto gemma = moe;
  gemma["architectures"] = {"Gemma2ForCausalLM"};
  gemma["hidden_activation"] = "gelu_pytorch_tanh";
  gemma["attn_logit_softcapping"] = 50.0;
  gemma["final_logit_softcapping"] = 30.0;
  gemma["sliding_window"] = 8;
  gemma["query_pre_attn_scalar"] = 16;
  ASSERT_TRUE(ParseHfConfig(gemma.dump(), "config.json").ok());
  j = gemma;
  j["query_pre_attn_scalar"] = 144;  // Gemma 2 27B: hidden_size / heads, not head_dim
  EXPECT_THAT(error(j), HasSubstr("'query_pre_attn_scalar' = 144"));
  j = gemma;
  j["hidden_activation"] = "gelu";
  EXPECT_THAT(error(j), HasSubstr("'hidden_activation' = \"gelu\""));
  j = gemma;
  j["architectures"] = {"Gemma3ForCausalLM"};
  EXPECT_THAT(error(j), HasSubstr("'attn_logit_softcapping' = 50.0"));
  j.erase("attn_logit_softcapping");
  j["layer_types"] = {"sliding_attention", "sliding_attention"};
  ASSERT_TRUE(ParseHfConfig(j.dump(), "config.json").ok());  // no global layer: all local
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  EXPECT_THAT(error(j), HasSubstr("'layer_types'"));

  auto llama = moe;
  llama["architectures"] = {"LlamaForCausalLM"};
  llama["attention_bias"] = true;
  EXPECT_THAT(error(llama), HasSubstr("'attention_bias' = true is not supported"));
  llama["architectures"] = {"Qwen2ForCausalLM"};  // Qwen 2 has q/k/v biases
  EXPECT_TRUE(ParseHfConfig(llama.dump(), "config.json").ok());
}

// The metadata of the families' keys that the fixtures do not show.
TEST(HfFamiliesTest, FamilyKeysAsTheConverterWritesThem) {
  auto moe = nlohmann::json::parse(kQwen3Moe);
  auto gemma3 = moe;
  gemma3["architectures"] = {"Gemma3ForCausalLM"};
  gemma3["hidden_activation"] = "gelu_pytorch_tanh";
  gemma3.erase("rms_norm_eps");  // Gemma3TextConfig's defaults
  gemma3.erase("max_position_embeddings");
  auto c = ParseHfConfig(gemma3.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->norm_eps, 1e-6);
  EXPECT_EQ(c->n_ctx, 131072);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_local_theta, 10000.0);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->sliding_window_pattern, 6);
  EXPECT_TRUE(c->tie_word_embeddings);
  // transformers 5 writes rope_parameters per layer type.
  gemma3["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 2e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  c = ParseHfConfig(gemma3.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->rope_theta, 2e6);
  EXPECT_EQ(c->rope_local_theta, 20000.0);
  EXPECT_EQ(c->rope_scaling, HfRopeScaling::kLinear);
  EXPECT_EQ(c->rope_factor, 8.0);
  gemma3["rope_parameters"]["sliding_attention"]["rope_type"] = "yarn";
  EXPECT_THAT(ParseHfConfig(gemma3.dump(), "config.json").message(),
              HasSubstr("'rope_parameters.sliding_attention.rope_type' = \"yarn\""));
  auto mistral = moe;
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 4096;
  c = ParseHfConfig(mistral.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->gguf_arch, "llama");
  EXPECT_EQ(c->architecture, "MistralForCausalLM");
  auto q = MapHfTensor("model.layers.0.self_attn.q_proj.weight", *c);  // llama's q/k permutation
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->transform, HfTransform::kPermuteHeads);
  EXPECT_EQ(c->sliding_window, 4096);
  mistral["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  c = ParseHfConfig(mistral.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_scaling, HfRopeScaling::kNone);
}

// Metadata of keys the fixtures do not carry: Mistral's window, Phi-3's 0 window (what the
// converter writes when the config has none), Llama's linear scaling.
TEST(HfFamiliesTest, WindowAndScalingKeys) {
  auto metadata = [](const nlohmann::json& j, std::vector<uint8_t>* image) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_TRUE(c.ok()) << c.message();
    GgufWriter w;
    if (c.ok()) AddHfHyperParameters(*c, "m", w);
    *image = w.Serialize();
    auto file = GgufFile::Parse(image->data(), image->size(), "m");
    EXPECT_TRUE(file.ok()) << file.message();
    return std::move(file).value();
  };
  std::vector<uint8_t> image;
  auto j = nlohmann::json::parse(kQwen3Moe);
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  GgufFile mistral = metadata(j, &image);
  EXPECT_EQ(mistral.GetString("general.architecture").value(), "llama");
  EXPECT_EQ(mistral.GetUint("llama.attention.sliding_window").value(), 4096u);
  EXPECT_EQ(mistral.GetUint("llama.attention.key_length").value(), 16u);
  EXPECT_EQ(mistral.GetUint("llama.rope.dimension_count").value(), 16u);
  EXPECT_EQ(mistral.GetUint("llama.vocab_size").value(), 10u);
  EXPECT_EQ(mistral.Find("llama.expert_count"), nullptr);
  j["sliding_window"] = nullptr;  // Mistral 7B v0.2+: no window, no key
  GgufFile mistral2 = metadata(j, &image);
  EXPECT_EQ(mistral2.Find("llama.attention.sliding_window"), nullptr);
  j["architectures"] = {"LlamaForCausalLM"};
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  GgufFile linear = metadata(j, &image);
  EXPECT_EQ(linear.GetString("llama.rope.scaling.type").value(), "linear");
  EXPECT_EQ(linear.GetFloat("llama.rope.scaling.factor").value(), 4.0);
  j.erase("rope_scaling");
  j["architectures"] = {"Phi3ForCausalLM"};
  j["original_max_position_embeddings"] = 32;
  j.erase("sliding_window");
  GgufFile phi3 = metadata(j, &image);
  EXPECT_EQ(phi3.GetUint("phi3.attention.sliding_window").value(), 0u);
  EXPECT_EQ(phi3.GetUint("phi3.rope.scaling.original_context_length").value(), 32u);
}

// A Qwen 3 MoE folder missing one expert's matrix names the stacked tensor and the expert.
TEST(HfFamiliesTest, MissingExpertIsNamed) {
  const std::string dir = testing::TempDir() + "/hf-family-missing-expert";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(testing::WriteText(dir + "/config.json", kQwen3Moe));
  fs::copy_file(FolderOf(kCases[5]) + "/tokenizer.json", dir + "/tokenizer.json");
  auto config = nlohmann::json::parse(kQwen3Moe);
  config["vocab_size"] = 512;
  ASSERT_TRUE(testing::WriteText(dir + "/config.json", config.dump()));
  testing::SafetensorsBuilder weights;
  for (int e = 0; e < 8; ++e) {
    if (e == 6) continue;
    weights.AddF32("model.layers.1.mlp.experts." + std::to_string(e) + ".up_proj.weight", {16, 64},
                   std::vector<float>(16 * 64, 0.5f));
  }
  ASSERT_TRUE(weights.WriteFile(dir + "/model.safetensors"));
  auto view = HfFolder::Open(dir);
  fs::remove_all(dir);
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(view.message(), HasSubstr("expert 6 of 'blk.1.ffn_up_exps.weight' is missing"));
}

std::vector<uint8_t> HalfBytes(const std::vector<float>& values, bool bf16) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = bf16 ? FloatToBf16(values[i]) : FloatToFp16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// F16 and BF16 folders (what most checkpoints hold): vectors and norms become F32 as the
// converter stores them, Gemma's +1 is added in f16 for f16 data (as torch adds f16 tensors) and
// in f32 for BF16 data (which the converter widens first), and matrices keep their type.
TEST(HfFamiliesTest, HalfPrecisionNormsAndVectorsBecomeF32) {
  for (const char* arch : {"Gemma2ForCausalLM", "Qwen2ForCausalLM"}) {
    const bool gemma = std::string(arch) == "Gemma2ForCausalLM";
    const std::string dir = testing::TempDir() + "/hf-family-half";
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto config = nlohmann::json::parse(kQwen3Moe);
    config["architectures"] = {arch};
    config["vocab_size"] = 512;
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["attn_logit_softcapping"] = 50.0;
    config["final_logit_softcapping"] = 30.0;
    config["sliding_window"] = 8;
    ASSERT_TRUE(testing::WriteText(dir + "/config.json", config.dump()));
    fs::copy_file(FolderOf(kCases[0]) + "/tokenizer.json", dir + "/tokenizer.json");
    // 1e-4 + 1 is 1 in f16 (its step at 1 is 2^-10) but not in f32.
    const std::vector<float> values(64, 1e-4f);
    testing::SafetensorsBuilder weights;
    weights.Add("model.norm.weight", "F16", {64}, HalfBytes(values, false));
    weights.Add("model.layers.0.input_layernorm.weight", "BF16", {64}, HalfBytes(values, true));
    weights.Add("model.layers.0.self_attn.q_proj.weight", "BF16", {64, 64},
                HalfBytes(std::vector<float>(64 * 64, 0.25f), true));
    if (!gemma)
      weights.Add("model.layers.0.self_attn.q_proj.bias", "F16", {64}, HalfBytes(values, false));
    ASSERT_TRUE(weights.WriteFile(dir + "/model.safetensors"));
    auto view = HfFolder::Open(dir);
    ASSERT_TRUE(view.ok()) << view.message();
    auto first = [&](const char* name) {
      const TensorInfo* t = view->FindTensor(name);
      EXPECT_NE(t, nullptr) << name;
      EXPECT_EQ(t ? t->type : GgmlType::kF16, GgmlType::kF32) << name;
      float v = 0;
      if (t) std::memcpy(&v, t->data, 4);
      return v;
    };
    const float f16_value = Fp16ToFloat(FloatToFp16(1e-4f));
    const float bf16_value = Bf16ToFloat(FloatToBf16(1e-4f));
    EXPECT_EQ(first("output_norm.weight"), gemma ? 1.0f : f16_value) << arch;
    EXPECT_EQ(first("blk.0.attn_norm.weight"), gemma ? bf16_value + 1.0f : bf16_value) << arch;
    if (gemma) {
      EXPECT_NE(bf16_value + 1.0f, 1.0f);
    } else {
      EXPECT_EQ(first("blk.0.attn_q.bias"), f16_value);
    }
    const TensorInfo* q = view->FindTensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, GgmlType::kBF16);
    EXPECT_EQ(q->dims, (std::vector<int64_t>{64, 64}));
    fs::remove_all(dir);
  }
}

class RemoveFolders : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const FamilyCase& c : kCases) fs::remove_all(testing::TempDir() + "/hf-family-" + c.name);
  }
};
const auto* const kRemoveFolders = ::testing::AddGlobalTestEnvironment(new RemoveFolders);

}  // namespace
}  // namespace kvserve
