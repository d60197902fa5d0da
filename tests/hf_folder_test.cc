// Hugging Face folders: a GPT-2 folder (Conv1D layout, `transformer.` prefix, two shards, the real
// GPT-2 tokenizer files) written from gpt2-tiny-f32.gguf, and a Llama folder (rotate-half q/k rows,
// a SentencePiece-style tokenizer.json) written from stories260K.gguf, load through HfFolder and
// give the GGUF model's logits bit for bit, as does their `kvserve convert` output; the tokenizers
// built from the HF files encode exactly as the GGUF ones; broken folders give named errors.
#include <sys/wait.h>

#include <algorithm>
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
#include "io/hf_tokenizer.h"
#include "io/safetensors.h"
#include "kv/kv_cache.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/forward.h"
#include "support/hf_weights.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
using testing::Layout;
using testing::ModelPath;
using testing::NameRule;
using testing::SafetensorsBuilder;
using testing::WriteWeights;
namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int32_t> PromptTokens(const std::string& reference) {
  const auto json = nlohmann::json::parse(ReadText(testing::ReferencePath(reference + ".json")));
  return json["prompt_tokens"].get<std::vector<int32_t>>();
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
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

// A GPT2LMHeadModel folder made from gpt2-tiny-f32.gguf (built once per test process).
const std::string& Gpt2Folder() {
  static const std::string dir = [] {
    const std::string out = testing::TempDir() + "/hf-gpt2-tiny";
    fs::create_directories(out);
    auto gguf = GgufFile::Open(ModelPath("gpt2-tiny-f32.gguf"));
    EXPECT_TRUE(gguf.ok()) << gguf.message();
    const ordered_json config = {
        {"architectures", {"GPT2LMHeadModel"}},
        {"model_type", "gpt2"},
        {"n_embd", gguf->GetUint("gpt2.embedding_length").value()},
        {"n_layer", gguf->GetUint("gpt2.block_count").value()},
        {"n_head", gguf->GetUint("gpt2.attention.head_count").value()},
        {"n_inner", gguf->GetUint("gpt2.feed_forward_length").value()},
        {"n_positions", gguf->GetUint("gpt2.context_length").value()},
        {"n_ctx", gguf->GetUint("gpt2.context_length").value()},
        {"vocab_size", 50257},
        {"layer_norm_epsilon", gguf->GetFloat("gpt2.attention.layer_norm_epsilon").value()},
        {"activation_function", "gelu_new"},
        {"bos_token_id", 50256},
        {"eos_token_id", 50256},
        {"tie_word_embeddings", gguf->FindTensor("output.weight") == nullptr},
    };
    EXPECT_TRUE(testing::WriteText(out + "/config.json", config.dump(2)));
    const std::vector<NameRule> rules = {
        {"token_embd.weight", "transformer.wte.weight", Layout::kSame},
        {"position_embd.weight", "transformer.wpe.weight", Layout::kSame},
        {"output_norm.weight", "transformer.ln_f.weight", Layout::kSame},
        {"output_norm.bias", "transformer.ln_f.bias", Layout::kSame},
        {"output.weight", "lm_head.weight", Layout::kSame},
        {"attn_norm.weight", "ln_1.weight", Layout::kSame},
        {"attn_norm.bias", "ln_1.bias", Layout::kSame},
        {"attn_qkv.weight", "attn.c_attn.weight", Layout::kConv1D},
        {"attn_qkv.bias", "attn.c_attn.bias", Layout::kSame},
        {"attn_output.weight", "attn.c_proj.weight", Layout::kConv1D},
        {"attn_output.bias", "attn.c_proj.bias", Layout::kSame},
        {"ffn_norm.weight", "ln_2.weight", Layout::kSame},
        {"ffn_norm.bias", "ln_2.bias", Layout::kSame},
        {"ffn_up.weight", "mlp.c_fc.weight", Layout::kConv1D},
        {"ffn_up.bias", "mlp.c_fc.bias", Layout::kSame},
        {"ffn_down.weight", "mlp.c_proj.weight", Layout::kConv1D},
        {"ffn_down.bias", "mlp.c_proj.bias", Layout::kSame},
    };
    WriteWeights(*gguf, out, "transformer.h.", rules, 0, 0, /*shards=*/true);
    for (const auto& entry : fs::directory_iterator(ModelPath("hf-gpt2-tokenizer"))) {
      fs::copy_file(entry.path(), out + "/" + entry.path().filename().string(),
                    fs::copy_options::overwrite_existing);
    }
    return out;
  }();
  return dir;
}

// A LlamaForCausalLM folder made from stories260K.gguf (built once per test process).
const std::string& LlamaFolder() {
  static const std::string dir = [] {
    const std::string out = testing::TempDir() + "/hf-stories260K";
    fs::create_directories(out);
    auto gguf = GgufFile::Open(ModelPath("stories260K.gguf"));
    EXPECT_TRUE(gguf.ok()) << gguf.message();
    const int n_heads = static_cast<int>(gguf->GetUint("llama.attention.head_count").value());
    const int n_kv_heads = static_cast<int>(gguf->GetUint("llama.attention.head_count_kv").value());
    const ordered_json config = {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"hidden_size", gguf->GetUint("llama.embedding_length").value()},
        {"num_hidden_layers", gguf->GetUint("llama.block_count").value()},
        {"num_attention_heads", n_heads},
        {"num_key_value_heads", n_kv_heads},
        {"intermediate_size", gguf->GetUint("llama.feed_forward_length").value()},
        {"max_position_embeddings", gguf->GetUint("llama.context_length").value()},
        {"rms_norm_eps", gguf->GetFloat("llama.attention.layer_norm_rms_epsilon").value()},
        {"rope_theta", gguf->GetFloatOr("llama.rope.freq_base", 10000.0).value()},
        {"rope_scaling", nullptr},
        {"hidden_act", "silu"},
        {"tie_word_embeddings", gguf->FindTensor("output.weight") == nullptr},
        {"vocab_size", gguf->GetStringArray("tokenizer.ggml.tokens")->size()},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
    };
    EXPECT_TRUE(testing::WriteText(out + "/config.json", config.dump(2)));
    WriteWeights(*gguf, out, "model.layers.", testing::LlamaHfNameRules(), n_heads, n_kv_heads,
                 /*shards=*/false);
    testing::WriteSpmTokenizerFiles(*gguf, out);
    return out;
  }();
  return dir;
}

struct ModelCase {
  const char* gguf;
  const char* reference;
  const std::string& (*folder)();
};
const ModelCase kModelCases[] = {
    {"gpt2-tiny-f32.gguf", "gpt2-tiny-b", &Gpt2Folder},
    {"stories260K.gguf", "stories260K-a", &LlamaFolder},
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.gguf; }

class HfModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(HfModelTest, FolderGivesTheGgufLogitsBitForBit) {
  auto gguf = testing::LoadPathOrDie(ModelPath(GetParam().gguf));
  auto folder = testing::LoadPathOrDie(GetParam().folder());
  ASSERT_TRUE(gguf && folder);
  EXPECT_EQ(folder->config().n_vocab, gguf->config().n_vocab);
  EXPECT_EQ(folder->config().tied_output, gguf->config().tied_output);
  const std::vector<int32_t> tokens = PromptTokens(GetParam().reference);
  ExpectSameBits(testing::AllPositionLogits(*folder, tokens),
                 testing::AllPositionLogits(*gguf, tokens));
}

TEST_P(HfModelTest, ConvertedFolderGivesTheSameLogits) {
  const std::string out = testing::TempDir() + "/" + GetParam().reference + "-from-hf.gguf";
  const std::string command = testing::KvserveBinary() + " convert -m '" + GetParam().folder() +
                              "' -o '" + out + "' --type f32 >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto gguf = testing::LoadPathOrDie(ModelPath(GetParam().gguf));
  auto converted = testing::LoadPathOrDie(out);
  ASSERT_TRUE(gguf && converted);
  const std::vector<int32_t> tokens = PromptTokens(GetParam().reference);
  ExpectSameBits(testing::AllPositionLogits(*converted, tokens),
                 testing::AllPositionLogits(*gguf, tokens));
  // The converted file carries the tokenizer: it encodes like the original GGUF's.
  auto original_file = GgufFile::Open(ModelPath(GetParam().gguf));
  auto a = Tokenizer::FromGguf(converted->file());
  auto b = Tokenizer::FromGguf(*original_file);
  ASSERT_TRUE(a.ok() && b.ok()) << a.message() << b.message();
  const std::string text = "Once upon a time, a little dog ran to the park.";
  EXPECT_EQ((*a)->Encode(text, true, false), (*b)->Encode(text, true, false));
  fs::remove(out);  // the mapping stays valid until `converted` is destroyed
}

TEST_P(HfModelTest, RunCommandGeneratesTheGgufTokens) {
  std::string tokens;
  for (int32_t t : PromptTokens(GetParam().reference))
    tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
  auto run = [&](const std::string& model) {
    const std::string out = testing::TempDir() + "/run.json";
    const std::string command =
        testing::KvserveBinary() + " run -m '" + model + "' --prompt-tokens " + tokens +
        " -n 4 --temp 0 --ignore-eos --output-format json >'" + out + "' 2>/dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    auto json = nlohmann::json::parse(ReadText(out), nullptr, false);
    EXPECT_TRUE(json.is_object() && json.contains("tokens")) << ReadText(out);
    return json.is_object() && json.contains("tokens") ? json["tokens"].get<std::vector<int32_t>>()
                                                       : std::vector<int32_t>();
  };
  const std::vector<int32_t> from_folder = run(GetParam().folder());
  EXPECT_EQ(from_folder.size(), 4u);
  EXPECT_EQ(from_folder, run(ModelPath(GetParam().gguf)));
}

INSTANTIATE_TEST_SUITE_P(Models, HfModelTest, ::testing::ValuesIn(kModelCases),
                         [](const auto& info) {
                           return std::string(info.param.reference) == "gpt2-tiny-b" ? "Gpt2"
                                                                                     : "Llama";
                         });

TEST(HfFolderTest, TensorsPointIntoTheMappingUnlessTransformed) {
  auto view = HfFolder::Open(Gpt2Folder());
  ASSERT_TRUE(view.ok()) << view.message();
  auto gguf = GgufFile::Open(ModelPath("gpt2-tiny-f32.gguf"));
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ(view->GetString("general.architecture").value(), "gpt2");
  EXPECT_EQ(view->tensors().size(), gguf->tensors().size());
  for (const TensorInfo& t : gguf->tensors()) {
    const TensorInfo* mine = view->FindTensor(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_EQ(mine->dims, t.dims) << t.name;
    EXPECT_EQ(std::memcmp(mine->data, t.data, t.n_bytes), 0) << t.name;
  }
  // wte is used in place; the Conv1D c_attn weight was transposed into an owned buffer.
  auto shards = SafetensorsSet::OpenFolder(Gpt2Folder());
  ASSERT_TRUE(shards.ok());
  const uint8_t* wte = shards->Find("transformer.wte.weight")->data;
  const uint8_t* mapped_end = wte + shards->Find("transformer.wte.weight")->n_bytes;
  EXPECT_EQ(std::memcmp(view->FindTensor("token_embd.weight")->data, wte, 64), 0);
  EXPECT_FALSE(view->FindTensor("blk.0.attn_qkv.weight")->data >= wte &&
               view->FindTensor("blk.0.attn_qkv.weight")->data < mapped_end);
}

TEST(HfFolderTest, InfoCommandDescribesTheFolder) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("info " + Gpt2Folder(), &out, &err), 0) << err;
  EXPECT_NE(out.find("folder:        " + Gpt2Folder() + " (Hugging Face"), std::string::npos)
      << out;
  EXPECT_NE(out.find("architecture:  gpt2"), std::string::npos) << out;
  EXPECT_EQ(out.find("GGUF v"), std::string::npos) << out;
}

TEST(HfFolderTest, LlamaMetadataAsLlamaCppWritesIt) {
  auto view = HfFolder::Open(LlamaFolder());
  ASSERT_TRUE(view.ok()) << view.message();
  auto gguf = GgufFile::Open(ModelPath("stories260K.gguf"));
  for (const char* key : {"llama.context_length", "llama.embedding_length", "llama.block_count",
                          "llama.feed_forward_length", "llama.attention.head_count",
                          "llama.attention.head_count_kv", "llama.rope.dimension_count"}) {
    EXPECT_EQ(view->GetUint(key).value(), gguf->GetUint(key).value()) << key;
  }
  EXPECT_EQ(view->GetFloat("llama.attention.layer_norm_rms_epsilon").value(),
            gguf->GetFloat("llama.attention.layer_norm_rms_epsilon").value());
  EXPECT_EQ(view->GetString("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(view->GetStringArray("tokenizer.ggml.tokens").value(),
            gguf->GetStringArray("tokenizer.ggml.tokens").value());
  EXPECT_EQ(view->GetIntArray("tokenizer.ggml.token_type").value(),
            gguf->GetIntArray("tokenizer.ggml.token_type").value());
  EXPECT_EQ(view->GetString("tokenizer.chat_template").value(), "{{ messages }}");
  EXPECT_TRUE(view->GetBool("tokenizer.ggml.add_bos_token").value());
}

// The .inp test vectors of a vocabulary: strings separated by "\n__ggml_vocab_test__\n".
std::vector<std::string> VocabTestStrings(const std::string& name) {
  const std::string text = ReadText(ModelPath(name + ".inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find(separator, begin);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(begin, end - begin));
    begin = end + separator.size();
  }
  return out;
}

std::unique_ptr<Tokenizer> TokenizerOfFolder(const std::string& folder, int n_vocab,
                                             std::vector<uint8_t>* image) {
  auto hf = HfTokenizer::LoadFolder(folder, {.n_vocab = n_vocab});
  EXPECT_TRUE(hf.ok()) << hf.message();
  if (!hf.ok()) return nullptr;
  GgufWriter writer;
  hf->AddTo(writer);
  *image = writer.Serialize();
  auto file = GgufFile::Parse(image->data(), image->size(), folder);
  EXPECT_TRUE(file.ok()) << file.message();
  auto tokenizer = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

// The real GPT-2 tokenizer files (tokenizer.json, or vocab.json + merges.txt) give the GGUF
// GPT-2 vocabulary's ids on llama.cpp's test vectors, and the same tokens and merges.
TEST(HfTokenizerTest, Gpt2FilesMatchTheGgufVocabulary) {
  auto gguf_file = GgufFile::Open(ModelPath("ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(gguf_file.ok());
  auto reference = Tokenizer::FromGguf(*gguf_file);
  ASSERT_TRUE(reference.ok());
  const std::string legacy = testing::TempDir() + "/hf-gpt2-legacy";
  fs::create_directories(legacy);
  for (const char* name : {"vocab.json", "merges.txt", "tokenizer_config.json"}) {
    fs::copy_file(ModelPath("hf-gpt2-tokenizer") + "/" + name, legacy + "/" + name,
                  fs::copy_options::overwrite_existing);
  }
  const std::vector<std::string> inputs = VocabTestStrings("ggml-vocab-gpt-2.gguf");
  ASSERT_GT(inputs.size(), 20u);
  for (const std::string& folder : {ModelPath("hf-gpt2-tokenizer"), legacy}) {
    std::vector<uint8_t> image;
    auto tokenizer = TokenizerOfFolder(folder, 50257, &image);
    ASSERT_NE(tokenizer, nullptr);
    EXPECT_EQ(tokenizer->n_vocab(), (*reference)->n_vocab());
    EXPECT_EQ(tokenizer->eos(), 50256);
    EXPECT_TRUE(tokenizer->IsControl(50256));
    auto file = GgufFile::Parse(image.data(), image.size(), folder);
    EXPECT_EQ(file->GetStringArray("tokenizer.ggml.tokens").value(),
              gguf_file->GetStringArray("tokenizer.ggml.tokens").value());
    EXPECT_EQ(file->GetStringArray("tokenizer.ggml.merges").value(),
              gguf_file->GetStringArray("tokenizer.ggml.merges").value());
    for (const std::string& text : inputs) {
      EXPECT_EQ(tokenizer->Encode(text, false, false), (*reference)->Encode(text, false, false))
          << folder << ": '" << text << "'";
    }
    // A prompt longer than the saved truncation (50 tokens) is not cut.
    std::string longer;
    for (int i = 0; i < 40; ++i) longer += "hello world ";
    EXPECT_GT(tokenizer->Encode(longer, false, false).size(), 50u);
    EXPECT_EQ(tokenizer->Encode(longer, false, false), (*reference)->Encode(longer, false, false));
    EXPECT_EQ(tokenizer->Encode("<|endoftext|>", false, true), std::vector<int32_t>{50256});
  }
}

// The SentencePiece-style tokenizer.json written from stories260K's vocabulary encodes every
// test string as the GGUF SentencePiece tokenizer does.
TEST(HfTokenizerTest, SpmTokenizerJsonMatchesTheGgufVocabulary) {
  auto gguf_file = GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(gguf_file.ok());
  auto reference = Tokenizer::FromGguf(*gguf_file);
  ASSERT_TRUE(reference.ok());
  std::vector<uint8_t> image;
  auto tokenizer = TokenizerOfFolder(LlamaFolder(), 512, &image);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->model_name(), "llama");
  EXPECT_EQ(tokenizer->bos(), (*reference)->bos());
  EXPECT_EQ(tokenizer->eos(), (*reference)->eos());
  EXPECT_EQ(tokenizer->unk(), (*reference)->unk());
  EXPECT_TRUE(tokenizer->add_space_prefix());
  std::vector<std::string> inputs = VocabTestStrings("ggml-vocab-llama-spm.gguf");
  inputs.push_back("Once upon a time, there was a little girl named Lily.");
  for (const std::string& text : inputs) {
    EXPECT_EQ(tokenizer->Encode(text, true, false), (*reference)->Encode(text, true, false))
        << "'" << text << "'";
  }
}

// The GPT-2 folder with one file replaced, for the error cases: the other files are symlinks.
std::string BrokenCopy(const std::string& name, const std::string& file, const std::string& text) {
  const std::string dir = testing::TempDir() + "/broken-" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(Gpt2Folder())) {
    if (entry.path().filename() != file) {
      fs::create_symlink(entry.path(), dir + "/" + entry.path().filename().string());
    }
  }
  EXPECT_TRUE(testing::WriteText(dir + "/" + file, text));
  return dir;
}

TEST(HfFolderTest, BrokenFoldersGiveNamedErrors) {
  const std::string config = ReadText(Gpt2Folder() + "/config.json");
  auto error_of = [](const std::string& dir) {
    auto model = LoadModel(dir, TestBackend());
    EXPECT_FALSE(model.ok()) << dir;
    fs::remove_all(dir);
    return model.ok() ? std::string() : model.message();
  };
  std::string edited = config;
  edited.replace(edited.find("GPT2LMHeadModel"), 15, "BertModel");
  EXPECT_THAT(error_of(BrokenCopy("arch", "config.json", edited)),
              HasSubstr("unsupported architecture 'BertModel'"));
  EXPECT_THAT(error_of(BrokenCopy("json", "config.json", "{")), HasSubstr("not valid JSON"));
  auto json = nlohmann::json::parse(config);
  json["n_layer"] = 3;  // one layer more than the weights hold
  EXPECT_THAT(error_of(BrokenCopy("layers", "config.json", json.dump())),
              HasSubstr("missing required tensor 'blk.2.attn_norm.weight'"));
  json["n_layer"] = 1;  // fewer: the second layer's tensors are unknown
  EXPECT_THAT(error_of(BrokenCopy("fewer", "config.json", json.dump())),
              HasSubstr("tensor 'transformer.h.1."));
  json = nlohmann::json::parse(config);
  json["n_head"] = 0;
  EXPECT_THAT(error_of(BrokenCopy("heads", "config.json", json.dump())), HasSubstr("'n_head' = 0"));
  json = nlohmann::json::parse(config);
  json["n_embd"] = 32;
  EXPECT_THAT(error_of(BrokenCopy("width", "config.json", json.dump())), HasSubstr("has shape"));
  json = nlohmann::json::parse(config);
  json["activation_function"] = "relu";
  EXPECT_THAT(error_of(BrokenCopy("act", "config.json", json.dump())),
              HasSubstr("'activation_function' = \"relu\" is not supported"));
  EXPECT_THAT(error_of(BrokenCopy("tok", "tokenizer.json", R"({"model": {"type": "WordPiece"}})")),
              HasSubstr("model.type 'WordPiece' is not supported"));
  EXPECT_THAT(error_of(BrokenCopy("ugm", "tokenizer.json", R"({"model": {"type": "Unigram"}})")),
              HasSubstr("model.vocab is not an array of [piece, score]"));
  const std::string no_weights = BrokenCopy("weights", "model.safetensors.index.json", "");
  fs::remove(no_weights + "/model.safetensors.index.json");
  EXPECT_THAT(error_of(no_weights), HasSubstr("neither model.safetensors.index.json"));
}

TEST(HfFolderTest, LlamaConfigLimits) {
  const std::string base = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 3,
      "intermediate_size": 10, "max_position_embeddings": 32, "rms_norm_eps": 1e-5,
      "vocab_size": 10})";
  auto config = ParseHfConfig(base, "c.json");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.message(), HasSubstr("num_key_value_heads 3"));
  auto json = nlohmann::json::parse(base);
  json["num_key_value_heads"] = 4;
  EXPECT_TRUE(ParseHfConfig(json.dump(), "c.json").ok());
  json["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
  EXPECT_THAT(ParseHfConfig(json.dump(), "c.json").message(),
              HasSubstr("'rope_scaling.type' = \"yarn\" is not supported"));
  json["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // kvserve implements linear
  EXPECT_EQ(ParseHfConfig(json.dump(), "c.json")->rope_factor, 2.0);
  json.erase("rope_scaling");
  json["head_dim"] = 7;  // an explicit head_dim is key_length; RoPE needs it even
  EXPECT_THAT(ParseHfConfig(json.dump(), "c.json").message(), HasSubstr("head dimension 7"));
  json.erase("head_dim");
  json.erase("rms_norm_eps");
  EXPECT_THAT(ParseHfConfig(json.dump(), "c.json").message(),
              HasSubstr("missing required key 'rms_norm_eps'"));
}

// Removes the folders this test process wrote (each holds a copy of a model's weights).
class RemoveFolders : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const char* name : {"/hf-gpt2-tiny", "/hf-stories260K", "/hf-gpt2-legacy"}) {
      fs::remove_all(testing::TempDir() + name);
    }
  }
};
const auto* const kRemoveFolders = ::testing::AddGlobalTestEnvironment(new RemoveFolders);

}  // namespace
}  // namespace kvserve
