// Hugging Face T5 folders (model/t5_hf.h), written here from `kvserve synth` files by undoing
// llama.cpp's converter's renaming (GGUF names back to the HF ones, written apart from the
// loader's table; shapes reversed, bytes as they are): t5-tiny as a T5 v1.1 folder (gated-gelu,
// lm_head, num_decoder_layers) and t5-tiny-v1 as a v1.0 one (relu, tied: no lm_head, no
// num_decoder_layers), both with encoder.embed_tokens and decoder.embed_tokens beside shared (the
// converter keeps one of the three). The folder's view, and `kvserve convert` of it, hold the
// file's tensors byte for byte and its t5.* keys; the folder's tokenizer.json is a Unigram one (as
// T5TokenizerFast's) with the file's vocabulary, read as the t5 tokenizer. Plus t5-small's and
// flan-t5-small's configs' keys (as remembered, not checked against the files here), and the
// refusals by key and name; the folders run as their files. And a T5EncoderModel folder as the
// t5encoder file it converts to.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/embedder.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "support/cli.h"
#include "support/gguf_compare.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/synthetic_files.h"
#include "support/t5_run.h"
#include "support/t5_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct T5Case {
  const char* name;
  const char* preset;
  bool v1_1;  // gated-gelu, lm_head, num_decoder_layers
};

const T5Case kCases[] = {{"V1_1", "t5-tiny", true}, {"V1_0", "t5-tiny-v1", false}};

void PrintTo(const T5Case& c, std::ostream* os) { *os << c.name; }

// A block tensor's HF name after "<stack>.block.N.", from its GGUF name after "<enc|dec>.blk.N.".
std::string HfBlockName(const std::string& gguf, bool decoder, bool gated) {
  const std::string ffn = decoder ? "layer.2." : "layer.1.";
  const std::vector<std::pair<std::string, std::string>> names = {
      {"attn_norm.weight", "layer.0.layer_norm.weight"},
      {"attn_q.weight", "layer.0.SelfAttention.q.weight"},
      {"attn_k.weight", "layer.0.SelfAttention.k.weight"},
      {"attn_v.weight", "layer.0.SelfAttention.v.weight"},
      {"attn_o.weight", "layer.0.SelfAttention.o.weight"},
      {"attn_rel_b.weight", "layer.0.SelfAttention.relative_attention_bias.weight"},
      {"cross_attn_norm.weight", "layer.1.layer_norm.weight"},
      {"cross_attn_q.weight", "layer.1.EncDecAttention.q.weight"},
      {"cross_attn_k.weight", "layer.1.EncDecAttention.k.weight"},
      {"cross_attn_v.weight", "layer.1.EncDecAttention.v.weight"},
      {"cross_attn_o.weight", "layer.1.EncDecAttention.o.weight"},
      {"ffn_norm.weight", ffn + "layer_norm.weight"},
      {"ffn_gate.weight", ffn + "DenseReluDense.wi_0.weight"},
      {"ffn_up.weight", ffn + (gated ? "DenseReluDense.wi_1.weight" : "DenseReluDense.wi.weight")},
      {"ffn_down.weight", ffn + "DenseReluDense.wo.weight"}};
  for (const auto& [from, to] : names) {
    if (gguf == from) return to;
  }
  ADD_FAILURE() << "no HF name for " << gguf;
  return gguf;
}

// The HF name of a GGUF tensor of the synthesized file.
std::string HfName(const std::string& gguf, bool gated) {
  if (gguf == "token_embd.weight") return "shared.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  if (gguf == "enc.output_norm.weight") return "encoder.final_layer_norm.weight";
  if (gguf == "dec.output_norm.weight") return "decoder.final_layer_norm.weight";
  const bool decoder = gguf.starts_with("dec.");
  const size_t dot = gguf.find('.', 8);  // after "enc.blk.N"
  const std::string layer = gguf.substr(8, dot - 8);
  return std::string(decoder ? "decoder" : "encoder") + ".block." + layer + "." +
         HfBlockName(gguf.substr(dot + 1), decoder, gated);
}

// The config keys of the encoder, from the file's <arch>.* keys, for class `hf_class`.
ordered_json EncoderConfigOf(const GgufFile& f, const std::string& arch, const char* hf_class,
                             bool gated) {
  auto u = [&](const std::string& key) { return f.GetUint(arch + "." + key).value(); };
  return {{"architectures", {hf_class}},
          {"model_type", "t5"},
          {"d_model", u("embedding_length")},
          {"d_ff", u("feed_forward_length")},
          {"d_kv", u("attention.key_length")},
          {"num_layers", u("block_count")},
          {"num_heads", u("attention.head_count")},
          {"relative_attention_num_buckets", u("attention.relative_buckets_count")},
          {"relative_attention_max_distance", 128},
          {"layer_norm_epsilon", f.GetFloat(arch + ".attention.layer_norm_epsilon").value()},
          {"n_positions", u("context_length")},
          {"feed_forward_proj", gated ? "gated-gelu" : "relu"},
          {"vocab_size", f.GetStringArray("tokenizer.ggml.tokens")->size()}};
}

ordered_json ConfigOf(const GgufFile& f, bool v1_1) {
  ordered_json j = EncoderConfigOf(f, "t5", "T5ForConditionalGeneration", v1_1);
  j["decoder_start_token_id"] = f.GetUint("t5.decoder_start_token_id").value();
  j["is_encoder_decoder"] = true;
  j["dropout_rate"] = 0.1;
  j["tie_word_embeddings"] = !v1_1;
  j["pad_token_id"] = 0;
  j["eos_token_id"] = 2;
  if (v1_1) j["num_decoder_layers"] = f.GetUint("t5.decoder_block_count").value();
  return j;
}

// The file's tensors under their HF names into `path` (shapes reversed, bytes as they are), with
// the tied copies older checkpoints store beside `shared`: encoder.embed_tokens, and
// decoder.embed_tokens for a file with a decoder.
bool WriteHfWeights(const GgufFile& f, bool gated, bool decoder, const std::string& path) {
  testing::SafetensorsBuilder weights;
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    const std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    const std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
    weights.Add(HfName(t.name, gated), "F32", shape, bytes);
    if (t.name == "token_embd.weight") {
      weights.Add("encoder.embed_tokens.weight", "F32", shape, bytes);
      if (decoder) weights.Add("decoder.embed_tokens.weight", "F32", shape, bytes);
    }
  }
  return weights.WriteFile(path);
}

// The file's vocabulary (llama.cpp's Llama SPM one, 32,000 pieces: the t5 recipe has none of its
// own) in make_vocab.py's form, for the Unigram tokenizer.json of a T5 folder
// (support/t5_tokenizer_json.h): its pieces, scores and types, <unk> 0, <s> 1, </s> 2, the prefix
// space and whitespace removal of T5's spiece.model, EOS added.
nlohmann::json UnigramVocabOf(const GgufFile& f) {
  const std::vector<std::string_view> texts = f.GetStringArray("tokenizer.ggml.tokens").value();
  const std::vector<std::string> tokens(texts.begin(), texts.end());
  return {{"tokens", tokens},
          {"scores", f.GetFloatArray("tokenizer.ggml.scores").value()},
          {"types", f.GetIntArray("tokenizer.ggml.token_type").value()},
          {"add_dummy_prefix", true},
          {"remove_extra_whitespaces", true},
          {"keys", {{"bos_token_id", 1}, {"eos_token_id", 2}, {"unknown_token_id", 0}}}};
}

// The folder of `c` and the synthesized file it must convert to (built once per test process).
struct Built {
  std::string folder, gguf;
};

const Built& BuiltOf(const T5Case& c) {
  static std::map<std::string, Built> cases;
  auto [it, added] = cases.try_emplace(c.name);
  if (!added) return it->second;
  Built& b = it->second;
  b.gguf = testing::SynthesizedModel(c.preset, std::string(c.preset) + "-f32", GgmlType::kF32);
  b.folder = testing::TempDir() + "/hf-t5-" + c.name;
  fs::remove_all(b.folder);
  fs::create_directories(b.folder);
  auto f = GgufFile::Open(b.gguf);
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok()) return b;
  EXPECT_TRUE(WriteHfWeights(*f, c.v1_1, true, b.folder + "/model.safetensors"));
  EXPECT_TRUE(testing::WriteText(b.folder + "/config.json", ConfigOf(*f, c.v1_1).dump(2)));
  EXPECT_EQ(
      testing::WriteT5TokenizerFolder(UnigramVocabOf(*f), testing::T5JsonStyle::kCurrent, b.folder),
      "");
  return b;
}

class HfT5Test : public ::testing::TestWithParam<T5Case> {};

TEST_P(HfT5Test, FolderHoldsTheGgufTensorsAndKeys) {
  const Built& b = BuiltOf(GetParam());
  auto view = HfFolder::Open(b.folder);
  ASSERT_TRUE(view.ok()) << view.message();
  auto file = GgufFile::Open(b.gguf);
  ASSERT_TRUE(file.ok()) << file.message();
  testing::ExpectSameTensors(*view, *file);
  testing::ExpectSameArchKeys(*view, *file, "t5");
  EXPECT_EQ(view->FindTensor("output.weight") != nullptr, GetParam().v1_1);
  EXPECT_EQ(view->Find("t5.decoder_block_count") != nullptr, GetParam().v1_1);
  // The Unigram tokenizer.json is the t5 tokenizer with the file's pieces, scores and types.
  EXPECT_EQ(view->GetString("tokenizer.ggml.model").value(), "t5");
  EXPECT_EQ(view->GetStringArray("tokenizer.ggml.tokens").value(),
            file->GetStringArray("tokenizer.ggml.tokens").value());
  EXPECT_EQ(view->GetFloatArray("tokenizer.ggml.scores").value(),
            file->GetFloatArray("tokenizer.ggml.scores").value());
  EXPECT_EQ(view->GetIntArray("tokenizer.ggml.token_type").value(),
            file->GetIntArray("tokenizer.ggml.token_type").value());
  EXPECT_TRUE(view->GetBool("tokenizer.ggml.remove_extra_whitespaces").value());
  auto tokenizer = Tokenizer::FromGguf(*view);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  EXPECT_EQ((*tokenizer)->model_name(), "t5");
  EXPECT_FALSE((*tokenizer)->add_bos());
  EXPECT_TRUE((*tokenizer)->add_eos());
  const std::vector<int32_t> ids = (*tokenizer)->Encode("  Hello   world ", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ((*tokenizer)->Decode(ids), "Hello world");
}

TEST_P(HfT5Test, ConvertedFolderIsTheGguf) {
  const Built& b = BuiltOf(GetParam());
  const std::string out = testing::TempDir() + "/hf-t5-" + GetParam().name + ".gguf";
  const std::string args = "convert -m '" + b.folder + "' -o '" + out + "' --type f32";
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve(args, &printed, &errors), 0) << args << ": " << errors;
  auto converted = GgufFile::Open(out);
  auto file = GgufFile::Open(b.gguf);
  ASSERT_TRUE(converted.ok() && file.ok()) << converted.message();
  testing::ExpectSameTensors(*converted, *file);
  testing::ExpectSameArchKeys(*converted, *file, "t5");
  fs::remove(out);
}

// The folder loads as a model and runs: its encoder output and greedy answer are the GGUF's bits.
TEST_P(HfT5Test, FolderRunsAsTheGguf) {
  const Built& b = BuiltOf(GetParam());
  auto folder = testing::LoadPathOrDie(b.folder);
  auto gguf = testing::LoadPathOrDie(b.gguf);
  ASSERT_TRUE(folder && gguf);
  const std::vector<int32_t> input = {307, 83, 450, 262, 119, 498, 37, 221, 2};
  testing::T5Run a(*folder, 1), c(*gguf, 1);
  EXPECT_EQ(a.Encode({input}), c.Encode({input}));
  EXPECT_EQ(a.Greedy(12, {5, 9}), c.Greedy(12, {5, 9}));
}

INSTANTIATE_TEST_SUITE_P(Versions, HfT5Test, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// google-t5/t5-small's config.json: no num_decoder_layers, relu, tied.
ordered_json T5SmallConfig() {
  return {{"architectures", {"T5ForConditionalGeneration"}},
          {"d_ff", 2048},
          {"d_kv", 64},
          {"d_model", 512},
          {"decoder_start_token_id", 0},
          {"dropout_rate", 0.1},
          {"eos_token_id", 1},
          {"initializer_factor", 1.0},
          {"is_encoder_decoder", true},
          {"layer_norm_epsilon", 1e-06},
          {"model_type", "t5"},
          {"n_positions", 512},
          {"num_heads", 8},
          {"num_layers", 6},
          {"output_past", true},
          {"pad_token_id", 0},
          {"relative_attention_num_buckets", 32},
          {"vocab_size", 32128}};
}

// A config's t5.* keys as AddHfHyperParameters writes them.
Result<GgufFile> KeysOf(const ordered_json& config, std::vector<uint8_t>& image) {
  auto c = ParseHfConfig(config.dump(), "config.json");
  if (!c.ok()) return c.status();
  GgufWriter w;
  AddHfHyperParameters(*c, "t5", w);
  image = w.Serialize();
  return GgufFile::Parse(image.data(), image.size(), "t5");
}

TEST(HfT5Keys, RealSizeKeysAsTheConverterWritesThem) {
  std::vector<uint8_t> image;
  auto small = KeysOf(T5SmallConfig(), image);
  ASSERT_TRUE(small.ok()) << small.message();
  auto u = [&](const GgufFile& f, const char* key) {
    return f.GetUint(std::string("t5.") + key).value();
  };
  EXPECT_EQ(u(*small, "context_length"), 512u);
  EXPECT_EQ(u(*small, "embedding_length"), 512u);
  EXPECT_EQ(u(*small, "feed_forward_length"), 2048u);
  EXPECT_EQ(u(*small, "block_count"), 6u);
  EXPECT_EQ(small->Find("t5.decoder_block_count"), nullptr);
  EXPECT_EQ(u(*small, "attention.head_count"), 8u);
  EXPECT_EQ(u(*small, "attention.key_length"), 64u);
  EXPECT_EQ(u(*small, "attention.value_length"), 64u);
  EXPECT_EQ(u(*small, "attention.relative_buckets_count"), 32u);
  EXPECT_EQ(u(*small, "decoder_start_token_id"), 0u);
  EXPECT_EQ(small->GetFloat("t5.attention.layer_norm_rms_epsilon").value(), 1e-6f);
  EXPECT_EQ(small->GetFloat("t5.attention.layer_norm_epsilon").value(), 1e-6f);
  EXPECT_EQ(small->Find("t5.attention.head_count_kv"), nullptr);
  // google/flan-t5-small: 8 + 8 layers of 6 heads of 64 (384 wide against d_model 512),
  // gated-gelu; n_positions absent (512, as the converter assumes).
  ordered_json flan = T5SmallConfig();
  flan.erase("n_positions");
  flan["d_ff"] = 1024;
  flan["num_heads"] = 6;
  flan["num_layers"] = 8;
  flan["num_decoder_layers"] = 8;
  flan["feed_forward_proj"] = "gated-gelu";
  flan["tie_word_embeddings"] = false;
  std::vector<uint8_t> flan_image;
  auto f = KeysOf(flan, flan_image);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(u(*f, "decoder_block_count"), 8u);
  EXPECT_EQ(u(*f, "attention.head_count"), 6u);
  EXPECT_EQ(u(*f, "context_length"), 512u);
}

TEST(HfT5Keys, TensorNamesAsTheConverterMapsThem) {
  auto c = ParseHfConfig(T5SmallConfig().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  const std::pair<const char*, const char*> names[] = {
      {"shared.weight", "token_embd.weight"},
      {"encoder.embed_tokens.weight", ""},
      {"decoder.embed_tokens.weight", ""},
      {"lm_head.weight", "output.weight"},
      {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
       "enc.blk.0.attn_rel_b.weight"},
      {"encoder.block.5.layer.1.DenseReluDense.wi.weight", "enc.blk.5.ffn_up.weight"},
      {"encoder.block.5.layer.1.layer_norm.weight", "enc.blk.5.ffn_norm.weight"},
      {"decoder.block.3.layer.1.EncDecAttention.k.weight", "dec.blk.3.cross_attn_k.weight"},
      {"decoder.block.3.layer.1.layer_norm.weight", "dec.blk.3.cross_attn_norm.weight"},
      {"decoder.block.5.layer.2.DenseReluDense.wo.weight", "dec.blk.5.ffn_down.weight"},
      {"decoder.block.0.layer.2.DenseReluDense.wi_0.weight", "dec.blk.0.ffn_gate.weight"},
      {"decoder.final_layer_norm.weight", "dec.output_norm.weight"}};
  for (const auto& [hf, gguf] : names) {
    auto m = MapHfTensor(hf, *c);
    ASSERT_TRUE(m.ok()) << hf << ": " << m.message();
    EXPECT_EQ(m->name, gguf) << hf;
    EXPECT_EQ(m->transform, HfTransform::kNone) << hf;
  }
  for (const char* hf : {"encoder.block.6.layer.0.SelfAttention.q.weight",  // 6 layers
                         "encoder.block.0.layer.2.DenseReluDense.wo.weight",
                         "decoder.block.0.layer.3.layer_norm.weight",
                         "encoder.block.0.layer.0.SelfAttention.q.bias"}) {
    auto m = MapHfTensor(hf, *c);
    EXPECT_THAT(m.message(), HasSubstr(std::string("'") + hf + "'"));
  }
}

// What llama.cpp's t5 graph does not compute, and what the converter requires, refused by key.
TEST(HfT5Keys, ConfigsItCannotComputeAreRefusedByKey) {
  auto error = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  ordered_json j = T5SmallConfig();
  j["feed_forward_proj"] = "gated-silu";
  EXPECT_THAT(error(j), HasSubstr("'feed_forward_proj' = \"gated-silu\" is not supported"));
  j = T5SmallConfig();
  j["relative_attention_max_distance"] = 64;
  EXPECT_THAT(error(j), HasSubstr("'relative_attention_max_distance' = 64 is not supported"));
  for (const char* key :
       {"decoder_start_token_id", "d_kv", "relative_attention_num_buckets", "layer_norm_epsilon"}) {
    j = T5SmallConfig();
    j.erase(key);
    EXPECT_THAT(error(j), HasSubstr(std::string("missing required key '") + key + "'"));
  }
}

// A T5EncoderModel folder (t5encoder-tiny's tensors under their HF names, with
// encoder.embed_tokens beside shared; a config with no decoder keys): its view and `kvserve
// convert` of it hold the t5encoder file's tensors and keys, and it embeds as the file bit for bit.
// Decoder tensors and lm_head are not part of it.
TEST(HfT5Encoder, FolderIsTheT5EncoderFile) {
  const std::string gguf =
      testing::SynthesizedModel("t5encoder-tiny", "t5encoder-tiny-f32", GgmlType::kF32);
  auto f = GgufFile::Open(gguf);
  ASSERT_TRUE(f.ok()) << f.message();
  const std::string folder = testing::TempDir() + "/hf-t5encoder";
  fs::remove_all(folder);
  fs::create_directories(folder);
  ASSERT_TRUE(WriteHfWeights(*f, true, false, folder + "/model.safetensors"));
  const ordered_json config = EncoderConfigOf(*f, "t5encoder", "T5EncoderModel", true);
  ASSERT_TRUE(testing::WriteText(folder + "/config.json", config.dump(2)));
  ASSERT_EQ(
      testing::WriteT5TokenizerFolder(UnigramVocabOf(*f), testing::T5JsonStyle::kCurrent, folder),
      "");
  auto view = HfFolder::Open(folder);
  ASSERT_TRUE(view.ok()) << view.message();
  testing::ExpectSameTensors(*view, *f);
  testing::ExpectSameArchKeys(*view, *f, "t5encoder");
  EXPECT_EQ(view->Find("t5encoder.decoder_start_token_id"), nullptr);
  const std::string out = testing::TempDir() + "/hf-t5encoder.gguf";
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve("convert -m '" + folder + "' -o '" + out + "' --type f32", &printed,
                                &errors),
            0)
      << errors;
  auto converted = GgufFile::Open(out);
  ASSERT_TRUE(converted.ok()) << converted.message();
  testing::ExpectSameTensors(*converted, *f);
  testing::ExpectSameArchKeys(*converted, *f, "t5encoder");
  auto from_folder = testing::LoadPathOrDie(folder);
  auto from_file = testing::LoadPathOrDie(gguf);
  ASSERT_TRUE(from_folder && from_file);
  const std::vector<int32_t> input = {307, 83, 450, 262, 2};
  Embedder a(*from_folder, 1, 512, 512), b(*from_file, 1, 512, 512);
  auto ea = a.Run({&input, 1}, {.pooling = Pooling::kNone, .normalize = -1});
  auto eb = b.Run({&input, 1}, {.pooling = Pooling::kNone, .normalize = -1});
  ASSERT_TRUE(ea.ok() && eb.ok());
  EXPECT_EQ(ea->vectors, eb->vectors);
  auto c = ParseHfConfig(config.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  for (const char* hf : {"decoder.block.0.layer.0.SelfAttention.q.weight", "lm_head.weight",
                         "decoder.final_layer_norm.weight"}) {
    EXPECT_THAT(MapHfTensor(hf, *c).message(), HasSubstr(std::string("'") + hf + "'"));
  }
  fs::remove(out);
}

}  // namespace
}  // namespace kvserve
