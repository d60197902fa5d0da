// A tokenizer.json whose byte-level pre-tokenizer has no llama.cpp name: its own stages (Split
// regexes, individual Digits, then GPT-2's split where ByteLevel has use_regex) are kept in
// tokenizer.kvserve.pre_stages and applied in order; what cannot be applied exactly is refused by
// name. Built on the real GPT-2 tokenizer files of ../shared/models/hf-gpt2-tokenizer.
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
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A copy of the GPT-2 tokenizer folder with `pre_tokenizer` replaced.
std::string FolderWithPre(const std::string& name, const json& pre) {
  const std::string source = testing::ModelPath("hf-gpt2-tokenizer");
  const std::string dir = testing::TempDir() + "/hf-pre-" + name;
  fs::create_directories(dir);
  std::ifstream in(source + "/tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  json root = json::parse(text.str());
  root["pre_tokenizer"] = pre;
  std::ofstream(dir + "/tokenizer.json") << root.dump();
  fs::copy_file(source + "/tokenizer_config.json", dir + "/tokenizer_config.json",
                fs::copy_options::overwrite_existing);
  return dir;
}

struct Loaded {
  std::vector<uint8_t> image;
  std::unique_ptr<Tokenizer> tokenizer;
};

Result<Loaded> Load(const std::string& folder) {
  auto hf = HfTokenizer::LoadFolder(folder, {.n_vocab = 50257});
  if (!hf.ok()) return hf.status();
  Loaded out;
  GgufWriter writer;
  hf->AddTo(writer);
  out.image = writer.Serialize();
  auto file = GgufFile::Parse(out.image.data(), out.image.size(), folder);
  if (!file.ok()) return file.status();
  auto tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) return tokenizer.status();
  out.tokenizer = std::move(tokenizer).value();
  return out;
}

const json kByteLevel = {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", true}};

TEST(HfPreTokenizerTest, OwnStagesAreAppliedInOrder) {
  auto reference = Load(testing::ModelPath("hf-gpt2-tokenizer"));
  ASSERT_TRUE(reference.ok()) << reference.message();
  const json digits = {{"type", "Digits"}, {"individual_digits", true}};
  auto custom = Load(FolderWithPre(
      "digits", {{"type", "Sequence"}, {"pretokenizers", json::array({digits, kByteLevel})}}));
  ASSERT_TRUE(custom.ok()) << custom.message();
  auto file = GgufFile::Parse(custom->image.data(), custom->image.size(), "custom");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->GetString("tokenizer.ggml.pre").value(), "kvserve-stages");
  ASSERT_EQ(file->GetStringArray("tokenizer.kvserve.pre_stages")->size(), 2u);
  EXPECT_EQ(file->GetStringArray("tokenizer.kvserve.pre_stages")->at(0), "\\p{N}");

  // Every digit is its own piece before GPT-2's split; the rest is GPT-2's.
  const Tokenizer& ref = *reference->tokenizer;
  std::vector<int32_t> want;
  for (const char* piece : {"abc ", "1", "2", "3", "4", "5", " def"}) {
    const std::vector<int32_t> ids = ref.Encode(piece, false, false);
    want.insert(want.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(custom->tokenizer->Encode("abc 12345 def", false, false), want);
  EXPECT_NE(ref.Encode("abc 12345 def", false, false), want);  // the stage changes something
  for (const char* text : {"Hello world", "  two  spaces", "it's\nnew lines\n\n", "naïve café"}) {
    EXPECT_EQ(custom->tokenizer->Encode(text, false, false), ref.Encode(text, false, false))
        << text;
  }

  // A Split regex stage (isolated matches) with ByteLevel's regex off: only the file's regex.
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", "\\s+|[^\\s]+"}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  json no_regex = kByteLevel;
  no_regex["use_regex"] = false;
  auto words = Load(FolderWithPre(
      "split", {{"type", "Sequence"}, {"pretokenizers", json::array({split, no_regex})}}));
  ASSERT_TRUE(words.ok()) << words.message();
  // One word is one piece either way; GPT-2 splits "don't" where this regex does not.
  EXPECT_EQ(words->tokenizer->Encode("stop", false, false), ref.Encode("stop", false, false));
  EXPECT_NE(words->tokenizer->Encode("don't stop", false, false),
            ref.Encode("don't stop", false, false));
}

TEST(HfPreTokenizerTest, WhatCannotBeAppliedExactlyIsRefusedByName) {
  const json merged = {{"type", "Split"},
                       {"pattern", {{"Regex", "\\d"}}},
                       {"behavior", "MergedWithPrevious"},
                       {"invert", false}};
  auto a = Load(FolderWithPre(
      "merged", {{"type", "Sequence"}, {"pretokenizers", json::array({merged, kByteLevel})}}));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find("MergedWithPrevious"), std::string::npos) << a.message();
  const json punctuation = {{"type", "Punctuation"}, {"behavior", "Isolated"}};
  auto b = Load(FolderWithPre(
      "punct", {{"type", "Sequence"}, {"pretokenizers", json::array({punctuation, kByteLevel})}}));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.message().find("'Punctuation' is not supported"), std::string::npos) << b.message();
}

}  // namespace
}  // namespace kvserve
