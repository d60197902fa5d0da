// Hugging Face folders of Gemma 4's assistant drafter (model/gemma4_hf.h: the classes
// Gemma4AssistantForCausalLM and Gemma4UnifiedAssistantForCausalLM of the gemma4-assistant
// architecture), written here from the synthesized gemma4-assistant-tiny F32 file by undoing what
// llama.cpp's converter does: GGUF names back to the HF ones (written apart from the loader's
// table), rope_freqs dropped and described by rope_parameters, embedding_length_out given as
// backbone_hidden_size, shapes reversed, and a masked embedding the converter skips. The folder's
// view, and `kvserve convert` of it, hold the file's tensors byte for byte and its keys; the
// assistant from the folder drafts for gemma4-tiny exactly as the file's does, bit for bit. Plus
// the refusals by key and by tensor name.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model_runner.h"
#include "io/gguf_reader.h"
#include "kv/kv_cache.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "model/hidden_state_drafter.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/gguf_compare.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "support/synthetic_files.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr const char* kArch = "gemma4-assistant";

std::string AssistantGguf() {
  return testing::SynthesizedModel("gemma4-assistant-tiny", "gemma4-assistant-tiny-f32",
                                   GgmlType::kF32);
}
std::string TargetGguf() {
  return testing::SynthesizedModel("gemma4-tiny", "gemma4-tiny-f32", GgmlType::kF32);
}

// GGUF "blk.N.<suffix>" -> HF "model.layers.N.<name>": the assistant's q-only layer.
const std::map<std::string, std::string> kLayerNames = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
};

const std::map<std::string, std::string> kGlobalNames = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"nextn.pre_projection.weight", "pre_projection.weight"},    // [n_embd, 2 n_target]
    {"nextn.post_projection.weight", "post_projection.weight"},  // [n_target, n_embd]
};

// [n] int64 values 0 .. n - 1, as safetensors stores them.
std::vector<uint8_t> Int64Ramp(int64_t n) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 8);
  for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * 8, &i, 8);
  return bytes;
}

// The file's tensors under HF names, and the masked embedding the converter skips (E2B's and
// E4B's: F32 centroids and an I64 token ordering). With `integer_scalar`, layer 0's layer_scalar
// is I64, which no weight may be.
void WriteWeights(const GgufFile& gguf, const std::string& dir, bool integer_scalar = false) {
  testing::SafetensorsBuilder weights;
  weights.AddF32("masked_embedding.centroids", {16, 128}, std::vector<float>(16 * 128, 0.25f));
  weights.Add("masked_embedding.token_ordering", "I64", {512}, Int64Ramp(512));
  for (const TensorInfo& t : gguf.tensors()) {
    const std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    ASSERT_EQ(t.type, GgmlType::kF32) << t.name;
    if (t.name == "rope_freqs.weight") continue;  // rope_parameters.full_attention gives it
    if (auto it = kGlobalNames.find(t.name); it != kGlobalNames.end()) {
      weights.Add(it->second, "F32", shape, std::move(bytes));
      continue;
    }
    ASSERT_EQ(t.name.rfind("blk.", 0), 0u) << t.name;
    const size_t dot = t.name.find('.', 4);
    auto it = kLayerNames.find(t.name.substr(dot + 1));
    ASSERT_NE(it, kLayerNames.end()) << "no HF name for " << t.name;
    if (integer_scalar && t.name == "blk.0.layer_output_scale.weight") {
      weights.Add("model.layers.0.layer_scalar", "I64", shape, Int64Ramp(1));
      continue;
    }
    weights.Add("model.layers." + t.name.substr(4, dot - 4) + "." + it->second, "F32", shape,
                std::move(bytes));
  }
  ASSERT_TRUE(weights.WriteFile(dir + "/model.safetensors"));
}

// The config of the synthesized file, in the Hugging Face keys of Gemma4AssistantForCausalLM.
ordered_json ConfigOf(const GgufFile& gguf) {
  const std::string a = std::string(kArch) + ".";
  auto u = [&](const std::string& key) { return gguf.GetUint(a + key).value(); };
  auto f = [&](const std::string& key) { return gguf.GetFloat(a + key).value(); };
  const int n_layers = static_cast<int>(u("block_count"));
  const GgufValue* pattern = gguf.Find(a + "attention.sliding_window_pattern");
  EXPECT_TRUE(pattern != nullptr && pattern->array_size == static_cast<uint64_t>(n_layers));
  ordered_json types = ordered_json::array();
  for (int i = 0; i < n_layers; ++i) {
    types.push_back(pattern->array_data[i] != 0 ? "sliding_attention" : "full_attention");
  }
  return {
      {"architectures", {"Gemma4AssistantForCausalLM"}},
      {"model_type", "gemma4_assistant"},
      {"hidden_size", u("embedding_length")},
      {"backbone_hidden_size", u("embedding_length_out")},
      {"num_hidden_layers", n_layers},
      {"num_attention_heads", u("attention.head_count")},
      {"num_key_value_heads", u("attention.head_count_kv")},
      {"head_dim", u("attention.key_length_swa")},
      {"global_head_dim", u("attention.key_length")},
      {"intermediate_size", u("feed_forward_length")},
      {"num_kv_shared_layers", 0},
      {"hidden_size_per_layer_input", nullptr},
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
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"attention_bias", false},
      {"enable_moe_block", false},
      {"tie_word_embeddings", true},
      {"vocab_size", gguf.GetStringArray("tokenizer.ggml.tokens")->size()},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
}

// The folder (built once per test process).
const std::string& Folder() {
  static const std::string dir = [] {
    const std::string out = testing::TempDir() + "/hf-gemma4-assistant";
    fs::remove_all(out);
    fs::create_directories(out);
    auto gguf = GgufFile::Open(AssistantGguf());
    EXPECT_TRUE(gguf.ok()) << gguf.message();
    EXPECT_TRUE(testing::WriteText(out + "/config.json", ConfigOf(*gguf).dump(2)));
    WriteWeights(*gguf, out);
    EXPECT_TRUE(
        testing::WriteText(out + "/tokenizer.json", testing::SpmTokenizerJson(*gguf).dump()));
    return out;
  }();
  return dir;
}

// A folder whose I64 tensor is a weight, not one the converter skips, is refused naming it.
TEST(HfGemma4Assistant, IntegerWeightIsRefusedByName) {
  const std::string dir = testing::TempDir() + "/hf-gemma4-assistant-i64";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : {"config.json", "tokenizer.json"}) {
    fs::copy_file(Folder() + "/" + file, dir + "/" + file);
  }
  auto gguf = GgufFile::Open(AssistantGguf());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  WriteWeights(*gguf, dir, true);
  auto view = HfFolder::Open(dir);
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(view.message(), HasSubstr("tensor 'model.layers.0.layer_scalar' is I64"));
  fs::remove_all(dir);
}

// The keys of the assistant's file, but shared_kv_layers and embedding_length_per_layer_input,
// which the converter writes as 0 for the assistant.
void ExpectSameKeys(const GgufFile& mine, const GgufFile& file) {
  const std::vector<std::string> zero = {"attention.shared_kv_layers",
                                         "embedding_length_per_layer_input"};
  testing::ExpectSameArchKeys(mine, file, kArch, zero);
  for (const std::string& key : zero) {
    auto value = mine.GetUint(std::string(kArch) + "." + key);
    ASSERT_TRUE(value.ok()) << value.message();
    EXPECT_EQ(*value, 0u) << key;
  }
}

TEST(HfGemma4Assistant, FolderHoldsTheGgufTensorsAndKeys) {
  auto view = HfFolder::Open(Folder());
  ASSERT_TRUE(view.ok()) << view.message();
  auto file = GgufFile::Open(AssistantGguf());
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(view->FindTensor("masked_embedding.centroids"), nullptr);
  testing::ExpectSameTensors(*view, *file);
  ExpectSameKeys(*view, *file);
}

// 12 tokens: past the window of 8.
const std::vector<int32_t> kPrompt = {1, 72, 301, 15, 499, 260, 33, 87, 144, 410, 222, 9};

int32_t ArgMax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Per assistant: 2 target steps after the prompt, 3 chained drafts each (each from the previous
// draft's hidden row, the step's argmax token teacher-forcing the next), all at the pending
// token's position: every draft's logits, then its next hidden row.
std::vector<std::vector<float>> DraftsOf(const std::vector<const Model*>& assistants) {
  auto target = testing::LoadPathOrDie(TargetGguf());
  if (target == nullptr) return {};
  std::vector<DraftTarget> bound;
  for (const Model* m : assistants) {
    auto b = m->hidden_state_drafter()->Bind(*target);
    EXPECT_TRUE(b.ok()) << b.message();
    if (!b.ok()) return {};
    bound.push_back(*b);
  }
  KvCache kv(target->kv_spec(), KvType::kF32, 16, 4, target->backend().allocator());
  ModelRunner runner(*target, kv, 2);
  runner.KeepFinalHidden(true);
  const std::vector<int32_t> table = {0, 1, 2, 3};
  const int n_vocab = target->config().n_vocab, n_target = target->config().n_embd;
  std::vector<int32_t> tokens = kPrompt;
  std::vector<std::vector<float>> out(assistants.size());
  StepLogits step = runner.RunSequence(tokens, 0, table, false);
  for (int s = 0; s < 2; ++s) {
    const int32_t pending = ArgMax(step.row(0));
    const int position = static_cast<int>(tokens.size());
    for (size_t i = 0; i < assistants.size(); ++i) {
      auto ws = assistants[i]->backend().NewWorkspace(WorkspaceOptions{.n_threads = 2});
      std::vector<float> h(step.hidden_row(0).begin(), step.hidden_row(0).end());
      std::vector<float> logits(n_vocab), h_next(n_target);
      int32_t token = pending;
      for (int d = 0; d < 3; ++d) {
        ForwardBatch batch;
        batch.Clear(kv.n_groups());
        batch.tokens = {token};
        batch.positions = {position};
        batch.seq_index = {0};
        batch.logit_rows = {0};
        for (KvGroupBatch& group : batch.kv_groups) group.block_tables = {table};
        assistants[i]->hidden_state_drafter()->Draft(bound[i], batch, h.data(), kv, *ws,
                                                     logits.data(), h_next.data());
        out[i].insert(out[i].end(), logits.begin(), logits.end());
        out[i].insert(out[i].end(), h_next.begin(), h_next.end());
        token = ArgMax(logits);
        h = h_next;
      }
    }
    tokens.push_back(pending);
    step = runner.RunSequence(tokens, position, table, false);
  }
  return out;
}

TEST(HfGemma4Assistant, FolderDraftsAsTheGgufBitForBit) {
  auto file = testing::LoadPathOrDie(AssistantGguf());
  auto folder = testing::LoadPathOrDie(Folder());
  ASSERT_TRUE(file && folder);
  EXPECT_EQ(folder->config().arch, kArch);
  ASSERT_NE(folder->hidden_state_drafter(), nullptr);
  const auto drafts = DraftsOf({file.get(), folder.get()});
  ASSERT_EQ(drafts.size(), 2u);
  testing::ExpectSameBits(drafts[1], drafts[0]);
}

TEST(HfGemma4Assistant, ConvertedFolderIsTheGguf) {
  const std::string out = testing::TempDir() + "/hf-gemma4-assistant.gguf";
  const std::string args = "convert -m '" + Folder() + "' -o '" + out + "' --type f32";
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve(args, &printed, &errors), 0) << args << ": " << errors;
  {
    auto converted_file = GgufFile::Open(out);
    auto file = GgufFile::Open(AssistantGguf());
    ASSERT_TRUE(converted_file.ok() && file.ok()) << converted_file.message();
    testing::ExpectSameTensors(*converted_file, *file);
    ExpectSameKeys(*converted_file, *file);
    auto assistant = testing::LoadPathOrDie(AssistantGguf());
    auto converted = testing::LoadPathOrDie(out);
    ASSERT_TRUE(assistant && converted);
    const auto drafts = DraftsOf({assistant.get(), converted.get()});
    ASSERT_EQ(drafts.size(), 2u);
    testing::ExpectSameBits(drafts[1], drafts[0]);
  }
  fs::remove(out);
}

// The Unified class reads as the same architecture; the keys the converter adds.
TEST(HfGemma4AssistantKeys, BothClassesGiveTheConvertersKeys) {
  auto gguf = GgufFile::Open(AssistantGguf());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  ordered_json j = ConfigOf(*gguf);
  for (const char* name : {"Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM"}) {
    j["architectures"] = {name};
    auto c = ParseHfConfig(j.dump(), "config.json");
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(c->gguf_arch, kArch) << name;
    EXPECT_EQ(c->n_embd_out, 256) << name;
  }
  j["num_kv_shared_layers"] = 4;  // every layer reading the target's cache: not the target's rule
  auto c = ParseHfConfig(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->n_kv_shared_layers, 4);
}

TEST(HfGemma4AssistantKeys, ConfigsKvserveCannotComputeAreRefusedByKey) {
  auto gguf = GgufFile::Open(AssistantGguf());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  const ordered_json base = ConfigOf(*gguf);
  auto error = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  ordered_json j = base;
  j.erase("backbone_hidden_size");
  EXPECT_THAT(error(j), HasSubstr("missing required key 'backbone_hidden_size'"));
  j = base;
  j["backbone_hidden_size"] = j["hidden_size"];
  EXPECT_THAT(error(j), HasSubstr("'backbone_hidden_size' = 128 is not supported"));
  j = base;
  j["enable_moe_block"] = true;
  EXPECT_THAT(error(j), HasSubstr("'enable_moe_block' = true is not supported"));
  j = base;
  j["num_experts"] = 4;
  EXPECT_THAT(error(j), HasSubstr("'num_experts' = 4 is not supported"));
  j = base;
  j["hidden_size_per_layer_input"] = 16;
  EXPECT_THAT(error(j), HasSubstr("'hidden_size_per_layer_input' = 16 is not supported"));
  j = base;
  j["num_kv_shared_layers"] = 5;
  EXPECT_THAT(error(j), HasSubstr("'num_kv_shared_layers' = 5 is not supported"));
  j = base;
  j["num_global_key_value_heads"] = 4;
  EXPECT_THAT(error(j), HasSubstr("'num_global_key_value_heads' = 4 is not supported"));
  j = base;
  j["rope_parameters"]["full_attention"]["rope_type"] = "default";
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.full_attention.rope_type'"));
}

// Tensors outside the assistant's list (constants.py's GEMMA4_ASSISTANT) are refused by name.
TEST(HfGemma4AssistantKeys, TensorsOutsideTheAssistantsListAreRefused) {
  auto gguf = GgufFile::Open(AssistantGguf());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto c = ParseHfConfig(ConfigOf(*gguf).dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  for (const char* name :
       {"model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.k_norm.weight", "model.layers.0.per_layer_input_gate.weight",
        "model.embed_tokens_per_layer.weight", "model.pre_projection.weight"}) {
    auto m = MapHfTensor(name, *c);
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_THAT(m.message(), HasSubstr(std::string("tensor '") + name + "'"));
    EXPECT_THAT(m.message(), HasSubstr("Gemma4AssistantForCausalLM"));
  }
  for (const char* name :
       {"masked_embedding.centroids", "masked_embedding.token_ordering", "lm_head.weight"}) {
    auto m = MapHfTensor(name, *c);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->name, "") << name;
  }
}

class RemoveFolder : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(testing::TempDir() + "/hf-gemma4-assistant"); }
};
const auto* const kRemoveFolder = ::testing::AddGlobalTestEnvironment(new RemoveFolder);

}  // namespace
}  // namespace kvserve
