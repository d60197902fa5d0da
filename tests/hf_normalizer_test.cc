// tokenizer.json normalizers: each stage of tokenizer/normalizer.h on hand-made strings (Unicode
// forms, lowercase with the final sigma, accents, strip, replace, prepend, invalid UTF-8 kept),
// and Hugging Face folders (the real GPT-2 tokenizer, and stories260K's SentencePiece vocabulary)
// whose normalizer is kept in tokenizer.kvserve.normalizer and applied before encoding; what
// kvserve cannot apply is refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_tokenizer.h"
#include "support/paths.h"
#include "support/spm_tokenizer_json.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Apply(std::vector<std::string> triples, const std::string& text) {
  auto normalizer = Normalizer::FromTriples(triples);
  EXPECT_TRUE(normalizer.ok()) << normalizer.message();
  return normalizer.ok() ? normalizer->Apply(text) : "";
}

const std::string kEAcute = "\xC3\xA9";          // é, composed
const std::string kEDecomposed = "e\xCC\x81";    // e + U+0301
const std::string kLigatureFi = "\xEF\xAC\x81";  // ﬁ U+FB01
const std::string kFullwidthA = "\xEF\xBC\xA1";  // Ａ U+FF21
const std::string kCircledOne = "\xE2\x91\xA0";  // ① U+2460

TEST(NormalizerTest, UnicodeForms) {
  EXPECT_EQ(Apply({"nfc", "", ""}, "caf" + kEDecomposed), "caf" + kEAcute);
  EXPECT_EQ(Apply({"nfd", "", ""}, "caf" + kEAcute), "caf" + kEDecomposed);
  EXPECT_EQ(Apply({"nfc", "", ""}, kLigatureFi), kLigatureFi);  // compatibility: NFKC only
  EXPECT_EQ(Apply({"nfkc", "", ""}, kLigatureFi + kFullwidthA + kCircledOne), "fiA1");
  EXPECT_EQ(Apply({"nfkd", "", ""}, kEAcute), kEDecomposed);
}

TEST(NormalizerTest, LowercaseIsFullUnicodeWithTheFinalSigma) {
  EXPECT_EQ(Apply({"lowercase", "", ""}, "HeLLo \xC3\x80"), "hello \xC3\xA0");  // À -> à
  // ΟΔΟΣ -> οδος with the final ς (U+03C2), Σ inside a word -> σ (U+03C3).
  EXPECT_EQ(Apply({"lowercase", "", ""}, "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"),
            "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82");
  EXPECT_EQ(Apply({"lowercase", "", ""}, "\xCE\xA3\xCE\x91"), "\xCF\x83\xCE\xB1");
}

TEST(NormalizerTest, AccentsStripReplacePrepend) {
  EXPECT_EQ(Apply({"nfd", "", "", "strip_accents", "", ""}, "caf" + kEAcute), "cafe");
  EXPECT_EQ(Apply({"strip", "1", "1"}, " \t a b \xE2\x80\x83"), "a b");  // U+2003 em space
  EXPECT_EQ(Apply({"strip", "1", "0"}, "  a b  "), "a b  ");
  EXPECT_EQ(Apply({"strip", "0", "1"}, "  a b  "), "  a b");
  EXPECT_EQ(Apply({"replace", "``", "\""}, "``a`` b"), "\"a\" b");
  EXPECT_EQ(Apply({"replace_regex", " {2,}", " "}, "a   b  c d"), "a b c d");
  EXPECT_EQ(Apply({"prepend", "_", ""}, "ab"), "_ab");
  EXPECT_EQ(Apply({"prepend", "_", ""}, ""), "");
  // Stages run in order: lowercase before the replace sees lowercase text.
  EXPECT_EQ(Apply({"lowercase", "", "", "replace", "ab", "X"}, "AB"), "X");
  EXPECT_EQ(Apply({"replace", "ab", "X", "lowercase", "", ""}, "AB"), "ab");
}

TEST(NormalizerTest, InvalidUtf8BytesPassThrough) {
  const std::string text = "\xFF" + kEDecomposed + "\xC3" + "A\x80";
  EXPECT_EQ(Apply({"nfc", "", ""}, text), "\xFF" + kEAcute + "\xC3" + "A\x80");
  EXPECT_EQ(Apply({"lowercase", "", ""}, text), "\xFF" + kEDecomposed + "\xC3" + "a\x80");
  EXPECT_EQ(Apply({"strip", "1", "1"}, "\xFF a "), "\xFF a");
}

TEST(NormalizerTest, BadStagesAreRefusedByName) {
  auto unknown = Normalizer::FromTriples(std::vector<std::string>{"nfc", "", "", "bert", "", ""});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("[1]: unknown stage 'bert'"), std::string::npos)
      << unknown.message();
  auto regex = Normalizer::FromTriples(std::vector<std::string>{"replace_regex", "(", "x"});
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.message().find("pattern '('"), std::string::npos) << regex.message();
  auto odd = Normalizer::FromTriples(std::vector<std::string>{"nfc", ""});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("triples"), std::string::npos) << odd.message();
}

// A folder `name` holding `root` as tokenizer.json (plus GPT-2's tokenizer_config.json).
std::string WriteFolder(const std::string& name, const json& root) {
  const std::string dir = testing::TempDir() + "/hf-norm-" + name;
  fs::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << root.dump();
  return dir;
}

json Gpt2Json() {
  std::ifstream in(testing::ModelPath("hf-gpt2-tokenizer") + "/tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

Result<std::unique_ptr<Tokenizer>> Load(const std::string& folder, int n_vocab,
                                        std::vector<uint8_t>& image) {
  auto hf = HfTokenizer::LoadFolder(folder, {.n_vocab = n_vocab});
  if (!hf.ok()) return hf.status();
  GgufWriter writer;
  hf->AddTo(writer);
  image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), folder);
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(*file);
}

const json kNfkcLower = {
    {"type", "Sequence"},
    {"normalizers", json::array({{{"type", "NFKC"}}, {{"type", "Lowercase"}}})}};

TEST(HfNormalizerTest, ByteLevelFolderAppliesItsNormalizer) {
  std::vector<uint8_t> plain_image, image;
  json root = Gpt2Json();
  root["normalizer"] = nullptr;
  auto plain = Load(WriteFolder("gpt2-plain", root), 50257, plain_image);
  ASSERT_TRUE(plain.ok()) << plain.message();
  root["normalizer"] = kNfkcLower;
  auto normalized = Load(WriteFolder("gpt2-nfkc-lower", root), 50257, image);
  ASSERT_TRUE(normalized.ok()) << normalized.message();
  auto file = GgufFile::Parse(image.data(), image.size(), "image");
  ASSERT_TRUE(file.ok());
  auto triples = file->GetStringArray("tokenizer.kvserve.normalizer");
  ASSERT_TRUE(triples.ok()) << triples.message();
  EXPECT_EQ(triples->size(), 6u);

  const std::string input = "HeLLo " + kFullwidthA + "nd " + kLigatureFi + "ne W\xC3\x96RLD";
  const std::string expected = "hello and fine w\xC3\xB6rld";
  const auto ids = (*normalized)->Encode(input, false, false);
  EXPECT_EQ(ids, (*plain)->Encode(expected, false, false));
  EXPECT_NE(ids, (*plain)->Encode(input, false, false));
  EXPECT_EQ((*normalized)->Decode(ids), expected);
  // Special tokens are matched before normalization and are not lowercased away.
  const auto with_special = (*normalized)->Encode("A<|endoftext|>B", false, true);
  ASSERT_EQ(with_special.size(), 3u);
  EXPECT_EQ(with_special[1], 50256);
}

TEST(HfNormalizerTest, UnsupportedNormalizersAreRefusedByName) {
  std::vector<uint8_t> image;
  json root = Gpt2Json();
  root["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
  auto bert = Load(WriteFolder("gpt2-bert", root), 50257, image);
  ASSERT_FALSE(bert.ok());
  EXPECT_NE(bert.message().find("normalizer 'BertNormalizer' is not supported"), std::string::npos)
      << bert.message();
  root["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  auto charsmap = Load(WriteFolder("gpt2-charsmap", root), 50257, image);
  ASSERT_FALSE(charsmap.ok());
  EXPECT_NE(charsmap.message().find("'Precompiled'"), std::string::npos) << charsmap.message();
  root["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({"NFC"})}};
  auto not_object = Load(WriteFolder("gpt2-not-object", root), 50257, image);
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.message().find("\"NFC\""), std::string::npos) << not_object.message();
}

TEST(HfNormalizerTest, SentencePieceFolderKeepsItsEscapingAndAppliesTheRest) {
  auto gguf = GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto reference = Tokenizer::FromGguf(*gguf);
  ASSERT_TRUE(reference.ok()) << reference.message();
  const int n_vocab = (*reference)->n_vocab();

  nlohmann::ordered_json root = testing::SpmTokenizerJson(*gguf);
  std::vector<uint8_t> image;
  auto same = Load(WriteFolder("spm-escaping", json(root)), n_vocab, image);
  ASSERT_TRUE(same.ok()) << same.message();
  auto file = GgufFile::Parse(image.data(), image.size(), "image");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("tokenizer.kvserve.normalizer"), nullptr);  // only the escaping: nothing
  const std::string text = "Once upon a time, Lily saw a BIG dog.";
  EXPECT_EQ((*same)->Encode(text, true, false), (*reference)->Encode(text, true, false));

  json stages = json(root)["normalizer"]["normalizers"];
  stages.insert(stages.begin(), json::object({{"type", "Lowercase"}}));
  json lowered = json(root);
  lowered["normalizer"]["normalizers"] = stages;
  auto lower = Load(WriteFolder("spm-lower", lowered), n_vocab, image);
  ASSERT_TRUE(lower.ok()) << lower.message();
  // The folder's own encoder (merge ranks as scores) on the lowercased text.
  EXPECT_EQ((*lower)->Encode(text, true, false),
            (*same)->Encode("once upon a time, lily saw a big dog.", true, false));
  EXPECT_NE((*lower)->Encode(text, true, false), (*same)->Encode(text, true, false));

  stages.push_back(
      json::object({{"type", "NFC"}}));  // after the escaping: its order cannot be kept
  lowered["normalizer"]["normalizers"] = stages;
  auto late = Load(WriteFolder("spm-late", lowered), n_vocab, image);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.message().find("after the SentencePiece space escaping"), std::string::npos)
      << late.message();
}

}  // namespace
}  // namespace kvserve
