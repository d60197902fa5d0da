// Every vocabulary in shared/models/vocab that has llama.cpp's test vectors (.inp/.out, the
// Hugging Face ids for encoding without BOS/EOS and without parsing special tokens): each file
// either matches every line exactly, is refused at load with a message naming what is
// unsupported, or is listed in kKnownMismatch (and then the test fails once it matches fully, so
// the list cannot go stale). Then llama.cpp's own ids for digit runs and special-token texts on
// every vocabulary that loads (tests/data/llama_cpp_tokens.json).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_reader.h"
#include "support/paths.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TestDataPath;

struct VocabCase {
  std::string name;     // ggml-vocab-<name>.gguf
  std::string refused;  // empty: loads; otherwise a substring of the load error
};

void PrintTo(const VocabCase& param, std::ostream* os) { *os << param.name; }

// Vocabularies that load but do not yet reproduce every line, each with a comment saying why.
// Empty today: every vocabulary that loads matches all 46 lines.
const std::set<std::string> kKnownMismatch = {};

const VocabCase kCases[] = {
    {"llama-bpe", ""},
    {"qwen2", ""},
    {"phi-3", ""},
    {"deepseek-llm", ""},
    {"deepseek-coder", ""},
    {"falcon", ""},
    {"mpt", ""},
    {"starcoder", ""},
    {"refact", ""},
    // WordPiece (BERT) is not implemented: refused at load, naming the model.
    {"bert-bge", "unsupported tokenizer model 'bert'"},
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += " " + std::to_string(id);
  return out;
}

class VocabTest : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabTest, MatchesLlamaCppVectors) {
  const VocabCase& param = GetParam();
  const std::string path = ModelPath("vocab/ggml-vocab-" + param.name + ".gguf");
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  auto tokenizer = Tokenizer::FromGguf(*file);
  if (!param.refused.empty()) {
    ASSERT_FALSE(tokenizer.ok()) << param.name << " now loads: test its vectors instead";
    EXPECT_NE(tokenizer.message().find(param.refused), std::string::npos) << tokenizer.message();
    return;
  }
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();

  const std::string inp = ReadFile(path + ".inp");
  const std::string out = ReadFile(path + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t begin = 0; begin < inp.size();) {
    const size_t end = inp.find(separator, begin);
    ASSERT_NE(end, std::string::npos) << "unterminated input at byte " << begin;
    inputs.push_back(inp.substr(begin, end - begin));
    begin = end + separator.size();
  }
  std::vector<std::string> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) expected.push_back(line);
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_EQ(inputs.size(), 46u);

  const bool known_mismatch = kKnownMismatch.count(param.name) > 0;
  size_t matching = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string ids = Join((*tokenizer)->Encode(inputs[i], false, false));
    matching += ids == expected[i];
    if (!known_mismatch) {
      EXPECT_EQ(ids, expected[i]) << param.name << " input " << i << ": '" << inputs[i] << "'";
    }
  }
  std::printf("%s: %zu/%zu lines match\n", param.name.c_str(), matching, inputs.size());
  if (known_mismatch) {
    EXPECT_LT(matching, inputs.size()) << param.name << " now matches: drop it from kKnownMismatch";
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<VocabCase>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// Staged splits run each stage on the previous stage's pieces: StarCoder cuts digits out first,
// so GPT-2's `\s+(?!\S)` sees "a  " alone and keeps both spaces in one piece, which a single
// combined pattern would not.
TEST(PreTokenizerStagesTest, EachStageSplitsThePreviousPieces) {
  auto starcoder = PreTokenizer::ForName("starcoder");
  ASSERT_TRUE(starcoder.ok()) << starcoder.message();
  EXPECT_EQ(starcoder->Split("a  12"), (std::vector<std::string_view>{"a", "  ", "1", "2"}));
  auto falcon = PreTokenizer::ForName("falcon");
  ASSERT_TRUE(falcon.ok()) << falcon.message();
  EXPECT_EQ(falcon->Split("x 12345"), (std::vector<std::string_view>{"x", " ", "123", "45"}));
}

// llama.cpp's "default" split (tokenizer.ggml.pre "default", or no key at all): punctuation runs,
// GPT-2's split, digit runs cut out, then ASCII digits in groups of three from the left.
TEST(PreTokenizerStagesTest, DefaultGroupsDigitsInThrees) {
  using Pieces = std::vector<std::string_view>;
  for (std::string_view name : {"default", ""}) {
    auto pre = PreTokenizer::ForName(name);
    ASSERT_TRUE(pre.ok()) << pre.message();
    EXPECT_EQ(pre->Split("x 12345"), (Pieces{"x", " ", "123", "45"})) << "'" << name << "'";
    EXPECT_EQ(pre->Split("3.14159"), (Pieces{"3", ".", "141", "59"}));
    EXPECT_EQ(pre->Split("a+=1000000"), (Pieces{"a", "+=", "100", "000", "0"}));
    // Other scripts' digits are \p{N} but not [0-9]: one piece, as in llama.cpp.
    EXPECT_EQ(pre->Split("\u0661\u0662\u0663\u0664"), (Pieces{"\u0661\u0662\u0663\u0664"}));
  }
}

TEST(PreTokenizerStagesTest, UnknownNameIsRefusedByName) {
  auto unknown = PreTokenizer::ForName("no-such-pre");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unsupported pre-tokenizer 'no-such-pre'"), std::string::npos)
      << unknown.message();
}

// llama.cpp's ids for the same texts on the same files: tests/data/llama_cpp_tokens.json, written
// by tests/data/make_llama_cpp_tokens.py with llama.cpp at commit 3f545becc, one run per case of
//   llama-tokenize -m FILE -p TEXT --ids --no-bos --no-escape --log-disable [--no-parse-special]
// (llama-tokenize parses special tokens unless given --no-parse-special). "digits": digit runs of
// several lengths, with spaces, letters, punctuation and other scripts' digits, on all 13
// vocabularies that load (BERT's is refused), without special-token parsing. "special": each
// vocabulary's control, user-defined and unknown token texts (bulk kinds capped at 3) and the
// common families' control texts, alone and inside "Hi ... there\n", and chat-shaped texts, each
// with and without special-token parsing.
struct LlamaCppCase {
  std::string vocab;  // under shared/models
  std::string text;
  bool parse_special = false;
  std::string ids;  // as Join writes them
};

std::vector<LlamaCppCase> LlamaCppCases(std::string_view kind, bool parse_special) {
  // {"vocabs": {VOCAB: {"digits": [[TEXT, IDS], ...],
  //                     "special": [[TEXT, IDS_WITHOUT, IDS_WITH_PARSE_SPECIAL], ...]}}}
  const auto root = nlohmann::json::parse(ReadFile(TestDataPath("llama_cpp_tokens.json")));
  std::vector<LlamaCppCase> cases;
  for (const auto& [vocab, group] : root.at("vocabs").items()) {
    for (const auto& entry : group.at(std::string(kind))) {
      const auto& ids = entry.at(kind == "special" && parse_special ? 2 : 1);
      cases.push_back(
          LlamaCppCase{vocab, entry.at(0), parse_special, Join(ids.get<std::vector<int32_t>>())});
    }
  }
  return cases;
}

// Control characters and non-ASCII bytes as \xNN, so a failing case reads on one line.
std::string Escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02X", byte);
      out += hex;
    }
  }
  return out;
}

// Encodes every case of `kind` on its vocabulary and expects llama.cpp's ids; prints per
// vocabulary how many match. Returns the vocabularies it saw.
std::set<std::string> ExpectLlamaCppIds(std::string_view kind, bool parse_special) {
  const std::vector<LlamaCppCase> cases = LlamaCppCases(kind, parse_special);
  EXPECT_GT(cases.size(), 100u);
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;  // nullptr: failed to load
  std::map<std::string, std::pair<int, int>> matched;            // vocab -> (matching, total)
  for (const LlamaCppCase& c : cases) {
    if (!tokenizers.contains(c.vocab)) {
      auto file = GgufFile::Open(ModelPath(c.vocab));
      EXPECT_TRUE(file.ok()) << file.message();
      auto loaded = file.ok() ? Tokenizer::FromGguf(*file)
                              : Result<std::unique_ptr<Tokenizer>>(file.status());
      EXPECT_TRUE(loaded.ok()) << loaded.message();
      tokenizers[c.vocab] = loaded.ok() ? std::move(*loaded) : nullptr;
    }
    const Tokenizer* tokenizer = tokenizers[c.vocab].get();
    if (tokenizer == nullptr) continue;
    const std::string ids = Join(tokenizer->Encode(c.text, false, c.parse_special));
    EXPECT_EQ(ids, c.ids) << c.vocab << " '" << Escaped(c.text)
                          << "' parse_special=" << c.parse_special;
    auto& [matching, total] = matched[c.vocab];
    matching += ids == c.ids;
    ++total;
  }
  std::set<std::string> vocabs;
  for (const auto& [vocab, counts] : matched) {
    std::printf("%s %s parse_special=%d: %d/%d match llama.cpp\n", std::string(kind).c_str(),
                vocab.c_str(), parse_special, counts.first, counts.second);
    vocabs.insert(vocab);
  }
  return vocabs;
}

TEST(LlamaCppTokensTest, DigitRunsMatchLlamaCpp) {
  // Every BPE vocabulary (the 9 of vocab/ and GPT-2) and the 3 SentencePiece ones.
  EXPECT_EQ(ExpectLlamaCppIds("digits", false).size(), 13u);
}

// Without special-token parsing, control-token texts are plain text, also those stored as
// user-defined or ordinary tokens that llama.cpp treats as control (Phi-3's "</s>").
TEST(LlamaCppTokensTest, SpecialTokenTextsWithoutParseSpecialMatchLlamaCpp) {
  EXPECT_EQ(ExpectLlamaCppIds("special", false).size(), 13u);
}

// With it, they become the tokens; Qwen 2's ordinary "</s>" too, as llama.cpp reads it as control,
// and Phi-3 drops the whitespace after most of its special tokens.
TEST(LlamaCppTokensTest, SpecialTokenTextsWithParseSpecialMatchLlamaCpp) {
  EXPECT_EQ(ExpectLlamaCppIds("special", true).size(), 13u);
}

}  // namespace
}  // namespace kvserve
