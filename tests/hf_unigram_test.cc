// A Hugging Face tokenizer.json with a Unigram model (io/hf_unigram.h, io/hf_tokenizer.h) on a
// vocabulary small enough to write out: T5Converter's layout (the <extra_id_N> appended to
// model.vocab at score 0) read as llama.cpp's T5 converter writes it, the flags each spelling
// gives, and what kvserve refuses, by field and value. Plus the base64 decoder the charsmap needs.
// The ids themselves are checked against llama.cpp in tests/t5_tokenizer_test.cc.
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_tokenizer.h"
#include "support/paths.h"
#include "support/safetensors_builder.h"
#include "tokenizer/tokenizer.h"
#include "util/base64.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

ordered_json Added(int id, const char* text, bool special) {
  return {{"id", id}, {"content", text}, {"normalized", false}, {"special", special}};
}

// T5's tokenizer.json in miniature: <pad> </s> <unk>, 5 pieces, <extra_id_1> <extra_id_0>.
ordered_json TinyT5Json() {
  const char* space = "\xE2\x96\x81";
  const std::pair<std::string, double> pieces[] = {
      {"<pad>", 0.0},       {"</s>", 0.0},     {"<unk>", 0.0},
      {space, -2.0},        {"a", -3.0},       {std::string(space) + "a", -1.5},
      {"b", -3.5},          {"<0x41>", -20.0}, {"<extra_id_1>", 0.0},
      {"<extra_id_0>", 0.0}};
  ordered_json vocab = ordered_json::array();  // [[piece, score], ...], not an object
  for (const auto& [piece, score] : pieces) vocab.push_back(ordered_json::array({piece, score}));
  return {{"added_tokens",
           {Added(0, "<pad>", true), Added(1, "</s>", true), Added(2, "<unk>", true),
            Added(8, "<extra_id_1>", true), Added(9, "<extra_id_0>", true)}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}},
              {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", space}}}}}},
          {"pre_tokenizer",
           {{"type", "Metaspace"}, {"replacement", space}, {"prepend_scheme", "always"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}}}},
          {"model", {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", vocab}}}};
}

// The folder's tokenizer (n_vocab padding to 12; T5's tokenizer_config.json) as a GGUF image, or
// the error.
Result<std::vector<uint8_t>> Convert(const ordered_json& tokenizer_json) {
  static int counter = 0;
  const std::string folder = testing::TempDir() + "/hf-unigram-" + std::to_string(counter++);
  std::filesystem::create_directories(folder);
  EXPECT_TRUE(testing::WriteText(folder + "/tokenizer.json", tokenizer_json.dump()));
  const ordered_json config = {
      {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}};
  EXPECT_TRUE(testing::WriteText(folder + "/tokenizer_config.json", config.dump()));
  auto tokenizer = HfTokenizer::LoadFolder(folder, {.n_vocab = 12});
  if (!tokenizer.ok()) return tokenizer.status();
  GgufWriter writer;
  writer.SetString("general.architecture", "t5");
  tokenizer->AddTo(writer);
  return writer.Serialize();
}

std::string Error(const ordered_json& tokenizer_json) {
  auto image = Convert(tokenizer_json);
  EXPECT_FALSE(image.ok()) << tokenizer_json.dump();
  return image.ok() ? std::string() : image.message();
}

TEST(HfUnigram, T5LayoutAsTheConverterWritesIt) {
  auto image = Convert(TinyT5Json());
  ASSERT_TRUE(image.ok()) << image.message();
  auto file = GgufFile::Parse(image->data(), image->size(), "tiny");
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->GetString("tokenizer.ggml.model").value(), "t5");
  EXPECT_EQ(file->GetString("tokenizer.ggml.pre").value(), "default");
  const auto tokens = file->GetStringArray("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens[10], "[PAD10]");
  EXPECT_EQ(tokens[11], "[PAD11]");
  EXPECT_EQ(file->GetIntArray("tokenizer.ggml.token_type").value(),
            (std::vector<int64_t>{3, 3, 2, 1, 1, 1, 1, 6, 4, 4, 5, 5}));
  EXPECT_EQ(file->GetFloatArray("tokenizer.ggml.scores").value(),
            (std::vector<float>{0, 0, 0, -2, -3, -1.5f, -3.5f, -20, -1000, -1000, -10000, -10000}));
  EXPECT_TRUE(file->GetBool("tokenizer.ggml.add_space_prefix").value());
  EXPECT_TRUE(file->GetBool("tokenizer.ggml.remove_extra_whitespaces").value());
  EXPECT_TRUE(file->GetBool("tokenizer.ggml.add_eos_token").value());
  EXPECT_EQ(file->Find("tokenizer.ggml.add_bos_token"), nullptr);
  EXPECT_EQ(file->GetUint("tokenizer.ggml.eos_token_id").value(), 1u);
  EXPECT_EQ(file->GetUint("tokenizer.ggml.unknown_token_id").value(), 2u);
  EXPECT_EQ(file->Find("tokenizer.ggml.precompiled_charsmap"), nullptr);
  auto tokenizer = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  // "▁a" beats "▁" + "a"; the extra id is cut out of the text, every fragment gets its ▁; "c" is
  // <unk>; the spaces at the ends go and the run is one ▁.
  EXPECT_EQ((*tokenizer)->Encode(" a<extra_id_0>ab  c ", true, false),
            (std::vector<int32_t>{5, 9, 5, 6, 3, 2, 1}));
}

TEST(HfUnigram, SpellingsOfTheFlags) {
  const char* space = "\xE2\x96\x81";
  struct Case {
    ordered_json normalizer, pre;
    bool prefix, remove;
  };
  const ordered_json meta_first = {
      {"type", "Metaspace"}, {"replacement", space}, {"prepend_scheme", "first"}};
  const ordered_json meta_never = {
      {"type", "Metaspace"}, {"replacement", space}, {"prepend_scheme", "never"}};
  const ordered_json legacy = {{"type", "Metaspace"}, {"add_prefix_space", true}};
  const ordered_json split = {{"type", "Sequence"},
                              {"pretokenizers", {{{"type", "WhitespaceSplit"}}, legacy}}};
  const ordered_json replace_space = {
      {"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}};
  const Case cases[] = {{nullptr, meta_first, true, false},
                        {nullptr, meta_never, false, false},
                        {nullptr, legacy, true, false},
                        {nullptr, split, true, true},
                        {replace_space, meta_never, false, true}};
  for (const Case& c : cases) {
    ordered_json j = TinyT5Json();
    j["normalizer"] = c.normalizer;
    j["pre_tokenizer"] = c.pre;
    auto image = Convert(j);
    ASSERT_TRUE(image.ok()) << image.message();
    auto file = GgufFile::Parse(image->data(), image->size(), "tiny");
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(file->GetBool("tokenizer.ggml.add_space_prefix").value(), c.prefix) << c.pre.dump();
    EXPECT_EQ(file->GetBool("tokenizer.ggml.remove_extra_whitespaces").value(), c.remove)
        << c.normalizer.dump() << " " << c.pre.dump();
  }
}

TEST(HfUnigram, RefusesWhatItCannotReproduceByFieldAndValue) {
  const char* space = "\xE2\x96\x81";
  struct Case {
    const char* pointer;  // JSON pointer into TinyT5Json
    ordered_json value;
    const char* message;
  };
  const Case cases[] = {
      {"/model/byte_fallback", true, "model.byte_fallback true is not supported"},
      {"/model/unk_id", nullptr, "model.unk_id null is not a piece id below 10"},
      {"/model/unk_id", 10, "model.unk_id 10 is not a piece id below 10"},
      {"/model/vocab/4", "a", "model.vocab[4] = \"a\" is not [piece, score]"},
      {"/normalizer/normalizers/0", {{"type", "NFKC"}}, "normalizer stage 0 {\"type\":\"NFKC\"}"},
      {"/normalizer/normalizers/1", {{"type", "Strip"}}, "Strip without Replace"},
      {"/normalizer/normalizers/1/pattern/Regex", " +", "normalizer stage 1"},
      {"/normalizer/normalizers/1",
       {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}},
       "normalizer stage 1 Precompiled after another stage is not supported"},
      {"/normalizer",
       {{"type", "Precompiled"}, {"precompiled_charsmap", "AA-A"}},
       "precompiled_charsmap: base64: character 2 (byte 45) is not in the alphabet"},
      {"/pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer {\"type\":\"Whitespace\"}"},
      {"/pre_tokenizer/replacement", "_", "Metaspace replacement \"_\" is not"},
      {"/pre_tokenizer/prepend_scheme", "sometimes", "prepend_scheme \"sometimes\" is not"},
      {"/pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "WhitespaceSplit"}},
          {{"type", "Metaspace"}, {"replacement", space}, {"prepend_scheme", "first"}}}}},
       "WhitespaceSplit with prepend_scheme \"first\""},
      {"/post_processor", {{"type", "RobertaProcessing"}}, "post_processor {\"type\":\"Roberta"},
      {"/post_processor/single/1/SpecialToken/id", "<pad>",
       "post_processor adds '<pad>', not the EOS token '</s>'"},
  };
  for (const Case& c : cases) {
    ordered_json j = TinyT5Json();
    if (std::string(c.pointer) == "/model/unk_id" && c.value.is_null()) {
      j["model"].erase("unk_id");
    } else {
      j[ordered_json::json_pointer(c.pointer)] = c.value;
    }
    EXPECT_THAT(Error(j), HasSubstr(c.message)) << c.pointer;
  }
  ordered_json j = TinyT5Json();
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(Error(j), HasSubstr("model.type 'WordPiece' is not supported (supported: BPE, "
                                  "Unigram)"));
}

TEST(Base64, DecodesAndRefusesByOffset) {
  const auto text = [](const char* in) {
    auto bytes = Base64Decode(in);
    EXPECT_TRUE(bytes.ok()) << in << ": " << bytes.message();
    return bytes.ok() ? std::string(bytes->begin(), bytes->end()) : std::string();
  };
  EXPECT_EQ(text(""), "");
  EXPECT_EQ(text("Zg=="), "f");
  EXPECT_EQ(text("Zm8="), "fo");
  EXPECT_EQ(text("Zm9v"), "foo");
  EXPECT_EQ(text("Zm9vYg"), "foob");  // padding optional
  EXPECT_EQ(text("AP8A/w+/"), std::string("\x00\xff\x00\xff\x0f\xbf", 6));
  EXPECT_THAT(Base64Decode("Zm9vY").message(), HasSubstr("5 characters leave 6 bits over"));
  EXPECT_THAT(Base64Decode("Zm=v").message(), HasSubstr("character 2 (byte 61)"));
  EXPECT_THAT(Base64Decode("Zg=").message(), HasSubstr("3 characters with padding"));
  EXPECT_THAT(Base64Decode("Zm 9").message(), HasSubstr("character 2 (byte 32)"));
}

}  // namespace
}  // namespace kvserve
