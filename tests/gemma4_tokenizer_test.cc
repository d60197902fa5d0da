// The gemma4 tokenizer model (tokenizer.ggml.model "gemma4") against llama.cpp at 3f545becc.
// Gemma 4's vocabulary is not on this machine, so tests/support/gemma4_vocab.h makes a gemma4
// vocabulary from Llama 3's byte-level one (raw UTF-8 tokens, ▁ for spaces, <0xNN> byte tokens but
// one, newline runs, Gemma 4's special tokens); tests/data/gemma4-tokenizer/reference.json holds
// the ids and decoded text llama.cpp gives for that very file (its sha256 is checked) on
// inputs.json: 74 short cases (spaces, newline runs, tabs, CJK, emoji, characters and bytes missing
// from the vocabulary, invalid UTF-8, special-token texts) and the 11 files of the tokenizer
// corpus. Every input, with and without special-token parsing, must give llama.cpp's ids, and the
// ids must decode to llama.cpp's text, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "support/cli.h"
#include "support/gemma4_vocab.h"
#include "support/paths.h"
#include "support/read_file.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/sha256.h"

namespace kvserve {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// make_reference.cc's Edit, undone: the head and tail of `input` around the middle bytes.
std::string ApplyEdit(const nlohmann::json& edit, const std::string& input) {
  const auto head = edit.at("head").get<size_t>();
  const auto tail = edit.at("tail").get<size_t>();
  return input.substr(0, head) + FromHex(edit.at("middle_hex").get<std::string>()) +
         input.substr(input.size() - tail);
}

std::string InputText(const nlohmann::json& input) {
  if (input.contains("text")) return input.at("text").get<std::string>();
  if (input.contains("hex")) return FromHex(input.at("hex").get<std::string>());
  return testing::ReadWholeFile(testing::TestDataPath(input.at("file").get<std::string>()));
}

// Writes the vocabulary file for make_reference.cc when KVSERVE_GEMMA4_VOCAB_OUT names a path
// (tests/data/gemma4-tokenizer/README.md), and prints its sha256.
void WriteVocabularyIfAsked(const std::vector<uint8_t>& image) {
  const char* out = std::getenv("KVSERVE_GEMMA4_VOCAB_OUT");
  if (out == nullptr) return;
  FILE* f = std::fopen(out, "wb");
  ASSERT_NE(f, nullptr) << out;
  ASSERT_EQ(std::fwrite(image.data(), 1, image.size(), f), image.size());
  ASSERT_EQ(std::fclose(f), 0);
  std::printf("%s: %zu bytes, sha256 %s\n", out, image.size(),
              Sha256::Hex(Sha256::Hash(image.data(), image.size())).c_str());
}

class Gemma4Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto source = GgufFile::Open(testing::ModelPath("vocab/ggml-vocab-llama-bpe.gguf"));
    ASSERT_TRUE(source.ok()) << source.message();
    image_ = new std::vector<uint8_t>(testing::Gemma4StyleVocab(*source));
    WriteVocabularyIfAsked(*image_);
    auto file = GgufFile::Parse(image_->data(), image_->size(), "gemma4-style.gguf");
    ASSERT_TRUE(file.ok()) << file.message();
    auto tokenizer = Tokenizer::FromGguf(*file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    tokenizer_ = tokenizer->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete image_;
  }

  static std::vector<uint8_t>* image_;
  static Tokenizer* tokenizer_;
};

std::vector<uint8_t>* Gemma4Tokenizer::image_ = nullptr;
Tokenizer* Gemma4Tokenizer::tokenizer_ = nullptr;

TEST_F(Gemma4Tokenizer, GivesLlamaCppIdsAndTextForEveryInput) {
  const auto reference = nlohmann::json::parse(
      testing::ReadWholeFile(testing::TestDataPath("gemma4-tokenizer/reference.json")));
  const auto inputs = nlohmann::json::parse(
      testing::ReadWholeFile(testing::TestDataPath("gemma4-tokenizer/inputs.json")));
  // The reference was made from this very file.
  ASSERT_EQ(Sha256::Hex(Sha256::Hash(image_->data(), image_->size())),
            reference.at("vocab_sha256").get<std::string>());
  ASSERT_EQ(tokenizer_->n_vocab(), reference.at("n_vocab").get<int>());
  const auto& cases = reference.at("cases");
  ASSERT_EQ(cases.size(), inputs.size());
  size_t n_ids = 0, n_bytes = 0, n_texts = 0, n_cleaned = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& expected = cases[i];
    const std::string name = expected.at("name").get<std::string>();
    ASSERT_EQ(name, inputs[i].at("name").get<std::string>());
    const std::string text = InputText(inputs[i]);
    n_bytes += text.size();
    for (const bool parse_special : {false, true}) {
      const char* ids_key = parse_special && !expected.contains("ids_parse_special_same")
                                ? "ids_parse_special"
                                : "ids";
      const auto theirs = expected.at(ids_key).get<std::vector<int32_t>>();
      const std::vector<int32_t> ours = tokenizer_->Encode(text, true, parse_special);
      n_ids += theirs.size();
      EXPECT_EQ(ours, theirs) << name << (parse_special ? " (parse_special)" : "");
      for (const bool render_special : {false, true}) {
        const std::string decoded = tokenizer_->Decode(theirs, render_special);
        const std::string text_key =
            std::string(parse_special ? "text_parse" : "text") + (render_special ? "_special" : "");
        EXPECT_TRUE(decoded == ApplyEdit(expected.at(text_key), text))
            << name << ": decoding differs from llama.cpp's " << text_key;
        n_texts++;
      }
    }
    n_cleaned += expected.at("detokenize_differs").get<bool>();
  }
  std::printf(
      "gemma4: %zu inputs, %zu bytes, %zu ids and %zu decoded texts compared; llama_detokenize's "
      "space clean-up changed %zu of the inputs' texts\n",
      cases.size(), n_bytes, n_ids, n_texts, n_cleaned);
}

TEST_F(Gemma4Tokenizer, ModelFlagsAndEndsOfGeneration) {
  EXPECT_EQ(tokenizer_->model_name(), "gemma4");
  EXPECT_EQ(tokenizer_->vocab().pre(), "gemma4");
  EXPECT_TRUE(tokenizer_->add_bos());  // the file says false; llama.cpp makes it true
  EXPECT_FALSE(tokenizer_->add_space_prefix());
  EXPECT_EQ(tokenizer_->bos(), 2);
  EXPECT_EQ(tokenizer_->eos(), 1);
  const Vocab& v = tokenizer_->vocab();
  for (const char* text : {"<eos>", "<turn|>", "<|tool_response>"}) {
    EXPECT_TRUE(tokenizer_->IsEndOfGeneration(v.Find(text))) << text;
  }
  for (const char* text : {"</s>", "<|turn>", "<bos>", "<tool_response|>", "<pad>"}) {
    EXPECT_FALSE(tokenizer_->IsEndOfGeneration(v.Find(text))) << text;
  }
  // </s> is an ordinary token beside <|tool_response>; <|tool_response> becomes control.
  EXPECT_EQ(v.type(v.Find("</s>")), TokenType::kNormal);
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("</s>")), "</s>");
  EXPECT_TRUE(tokenizer_->IsControl(v.Find("<|tool_response>")));
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("<|tool_response>")), "");
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("<|tool_response>"), true), "<|tool_response>");
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("<|channel>")), "<|channel>");  // user-defined
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("<0x41>")), "A");
  EXPECT_EQ(tokenizer_->TokenPiece(v.Find("\u2581the")), " the");
}

// Characters that are not tokens come out as byte tokens; a streaming decoder holds their bytes
// back until the character is whole and gives the same text as decoding at once.
TEST_F(Gemma4Tokenizer, StreamsByteFallbackCharacters) {
  const std::string text = "ꙮ 中文 \xF0\x9F\xA6\x99!";
  const std::vector<int32_t> ids = tokenizer_->Encode(text, false, false);
  const Vocab& v = tokenizer_->vocab();
  size_t byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += v.type(id) == TokenType::kByte;
  EXPECT_GE(byte_tokens, 3u);  // ꙮ (EA 99 AE) is no token
  StreamingDecoder decoder(*tokenizer_);
  std::string streamed;
  int held = 0;
  for (int32_t id : ids) {
    streamed += decoder.Push(id);
    held = std::max(held, decoder.pending_bytes());
  }
  streamed += decoder.Flush();
  EXPECT_GT(held, 0);
  EXPECT_EQ(streamed, SanitizeUtf8(tokenizer_->Decode(ids)));
}

// A Gemma 4 model file with this tokenizer loads, and `kvserve info` names the tokenizer.
TEST_F(Gemma4Tokenizer, InfoPrintsTheTokenizer) {
  const std::string vocab = testing::TempDir() + "/gemma4-style.gguf";
  const std::string model = testing::TempDir() + "/gemma4-tiny-gemma4-vocab.gguf";
  FILE* f = std::fopen(vocab.c_str(), "wb");
  ASSERT_NE(f, nullptr) << vocab;
  ASSERT_EQ(std::fwrite(image_->data(), 1, image_->size(), f), image_->size());
  ASSERT_EQ(std::fclose(f), 0);
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("synth --preset gemma4-tiny --vocab " + vocab + " -t 2 -o " + model,
                                &out, &err),
            0)
      << err;
  EXPECT_EQ(testing::RunKvserve("info " + model, &out, &err), 0) << err;
  EXPECT_NE(out.find("tokenizer:     gemma4 (pre-tokenizer gemma4), 126925 tokens, BOS <bos> (2) "
                     "added, EOS <eos> (1)\n"),
            std::string::npos)
      << out;
  std::filesystem::remove(vocab);
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace kvserve
