// The t5 tokenizer model (tokenizer.ggml.model "t5", SentencePiece unigram) against llama.cpp at
// 3f545becc. T5's vocabulary is not on this machine, so tests/data/t5-tokenizer/make_vocab.py
// trained two small unigram vocabularies with sentencepiece (vocab-*.json), and
// tests/support/t5_vocab.h turns them into GGUF files: "nfkc" (T5's layout and flags, a charsmap
// compiled from nmt_nfkc rules, <sep> and <extra_id_N> user-defined, [PADn] unused),
// "nfkc-no-charsmap" (the same file without its charsmap), "identity" (no charsmap, no prefix
// space, whitespace kept, byte tokens, BOS added, no EOS) and "nfkc-fi-user-defined" (nfkc with a
// user-defined token "ﬁx", on inputs-user-defined.json). reference-*.json hold the ids and the
// text llama.cpp gives for those very files (their sha256 is checked) on inputs.json: plain text,
// whitespace runs, text nmt_nfkc changes, CJK, emoji, unknown characters, special-token texts,
// invalid UTF-8 and three slices of the tokenizer corpus. Every input, with add_special and
// parse_special on and off, must give llama.cpp's ids, and the ids must decode to llama.cpp's text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_tokenizer.h"
#include "support/paths.h"
#include "support/read_file.h"
#include "support/t5_tokenizer_json.h"
#include "support/t5_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
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
  const std::string middle = edit.contains("middle")
                                 ? edit.at("middle").get<std::string>()
                                 : FromHex(edit.at("middle_hex").get<std::string>());
  return input.substr(0, head) + middle + input.substr(input.size() - tail);
}

std::string InputText(const nlohmann::json& input) {
  if (input.contains("text")) return input.at("text").get<std::string>();
  if (input.contains("hex")) return FromHex(input.at("hex").get<std::string>());
  return testing::ReadWholeFile(testing::TestDataPath(input.at("file").get<std::string>()));
}

nlohmann::json ReadJson(const std::string& name) {
  return nlohmann::json::parse(testing::ReadWholeFile(testing::TestDataPath(name)));
}

// One vocabulary of the test: its GGUF bytes and the tokenizer read from them.
struct Variant {
  std::string name;  // "nfkc", "nfkc-no-charsmap", "identity", "nfkc-fi-user-defined"
  std::vector<uint8_t> image;
  std::unique_ptr<Tokenizer> tokenizer;
};

// "nfkc-fi-user-defined" is nfkc with its [PAD1007] made the user-defined token "ﬁx": llama.cpp
// keeps whatever prefix of the text the user-defined tokens' trie walks as it is, so a "ﬁ" that
// no "x" follows is not normalized, and another character that starts with the same bytes (EF AC
// for "ﬂ", EF for the full-width forms) is split there. Its inputs are inputs-user-defined.json.
nlohmann::json VariantVocab(const std::string& name) {
  nlohmann::json vocab = ReadJson(name == "identity" ? "t5-tokenizer/vocab-identity.json"
                                                     : "t5-tokenizer/vocab-nfkc.json");
  if (name == "nfkc-no-charsmap") vocab.erase("precompiled_charsmap_hex");
  if (name == "nfkc-fi-user-defined") {
    vocab.at("tokens")[1007] = "\ufb01x";
    vocab.at("scores")[1007] = -1000.0;
    vocab.at("types")[1007] = 4;
  }
  return vocab;
}

// "hf-<name>" is the vocabulary <name> as a Hugging Face folder's tokenizer.json (the Unigram
// model transformers' T5Converter writes, support/t5_tokenizer_json.h; the older spelling for
// nfkc-no-charsmap and nfkc-fi-user-defined), read by HfTokenizer: it must give llama.cpp's ids
// for the GGUF file of <name>.
std::string BaseName(const std::string& variant) {
  return variant.starts_with("hf-") ? variant.substr(3) : variant;
}

std::vector<uint8_t> FolderImage(const std::string& name) {
  const nlohmann::json vocab = VariantVocab(name);
  const std::string folder = testing::TempDir() + "/hf-t5-tokenizer-" + name;
  const bool legacy = name == "nfkc-no-charsmap" || name == "nfkc-fi-user-defined";
  EXPECT_EQ(
      testing::WriteT5TokenizerFolder(
          vocab, legacy ? testing::T5JsonStyle::kLegacy : testing::T5JsonStyle::kCurrent, folder),
      "");
  auto tokenizer =
      HfTokenizer::LoadFolder(folder, {.n_vocab = static_cast<int>(vocab.at("tokens").size())});
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (!tokenizer.ok()) return {};
  GgufWriter writer;
  writer.SetString("general.architecture", "t5");
  tokenizer->AddTo(writer);
  return writer.Serialize();
}

std::vector<uint8_t> VariantImage(const std::string& name) {
  if (name != BaseName(name)) return FolderImage(BaseName(name));
  return testing::T5StyleVocab(VariantVocab(name));
}

std::string InputsOf(const std::string& variant) {
  return BaseName(variant) == "nfkc-fi-user-defined" ? "t5-tokenizer/inputs-user-defined.json"
                                                     : "t5-tokenizer/inputs.json";
}

// Writes the file for make_reference.cc when KVSERVE_T5_VOCAB_OUT names a folder
// (tests/data/t5-tokenizer/README.md), and prints its sha256.
void WriteVocabularyIfAsked(const Variant& variant) {
  const char* folder = std::getenv("KVSERVE_T5_VOCAB_OUT");
  if (folder == nullptr) return;
  const std::string path = std::string(folder) + "/t5-" + variant.name + ".gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(variant.image.data(), 1, variant.image.size(), f), variant.image.size());
  ASSERT_EQ(std::fclose(f), 0);
  std::printf("%s: %zu bytes, sha256 %s\n", path.c_str(), variant.image.size(),
              Sha256::Hex(Sha256::Hash(variant.image.data(), variant.image.size())).c_str());
}

class T5Tokenizer : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    variants_ = new std::vector<Variant>();
    for (const char* name :
         {"nfkc", "nfkc-no-charsmap", "identity", "nfkc-fi-user-defined", "hf-nfkc",
          "hf-nfkc-no-charsmap", "hf-identity", "hf-nfkc-fi-user-defined"}) {
      Variant variant{name, VariantImage(name), nullptr};
      if (variant.name == BaseName(variant.name)) WriteVocabularyIfAsked(variant);
      auto file = GgufFile::Parse(variant.image.data(), variant.image.size(), "t5-style.gguf");
      ASSERT_TRUE(file.ok()) << file.message();
      auto tokenizer = Tokenizer::FromGguf(*file);
      ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
      variant.tokenizer = std::move(*tokenizer);
      variants_->push_back(std::move(variant));
    }
  }
  static void TearDownTestSuite() { delete variants_; }

  static const Variant& variant(const std::string& name) {
    for (const Variant& v : *variants_) {
      if (v.name == name) return v;
    }
    std::abort();
  }

  static std::vector<Variant>* variants_;
};

std::vector<Variant>* T5Tokenizer::variants_ = nullptr;

// What one input's ids must be, from the reference's case `expected`.
std::vector<int32_t> ExpectedIds(const nlohmann::json& expected, const Tokenizer& tokenizer,
                                 bool add_special, bool parse_special) {
  const auto ids = expected.at("ids").get<std::vector<int32_t>>();
  if (parse_special) {
    return expected.contains("ids_parse_special_same")
               ? ids
               : expected.at("ids_parse_special").get<std::vector<int32_t>>();
  }
  if (add_special) return ids;
  if (expected.contains("ids_no_special")) {
    return expected.at("ids_no_special").get<std::vector<int32_t>>();
  }
  std::vector<int32_t> less_added = ids;  // llama.cpp gave these less what add_special adds
  if (tokenizer.add_eos() && !less_added.empty()) less_added.pop_back();
  if (tokenizer.add_bos() && !less_added.empty()) less_added.erase(less_added.begin());
  return less_added;
}

std::string Pieces(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool special) {
  std::string out;
  for (int32_t id : ids) out += tokenizer.TokenPiece(id, special);
  return out;
}

TEST_P(T5Tokenizer, GivesLlamaCppIdsAndTextForEveryInput) {
  const Variant& v = variant(GetParam());
  const auto reference = ReadJson("t5-tokenizer/reference-" + BaseName(v.name) + ".json");
  const auto inputs = ReadJson(InputsOf(v.name));
  // The reference was made from this very file (a folder's keys: FolderKeysEqualTheFiles).
  if (v.name == BaseName(v.name)) {
    ASSERT_EQ(Sha256::Hex(Sha256::Hash(v.image.data(), v.image.size())),
              reference.at("vocab_sha256").get<std::string>());
  }
  ASSERT_EQ(v.tokenizer->n_vocab(), reference.at("n_vocab").get<int>());
  const auto& cases = reference.at("cases");
  ASSERT_EQ(cases.size(), inputs.size());
  size_t n_ids = 0, n_texts = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& expected = cases[i];
    const std::string name = expected.at("name").get<std::string>();
    ASSERT_EQ(name, inputs[i].at("name").get<std::string>());
    const std::string text = InputText(inputs[i]);
    for (const auto& [add_special, parse_special] :
         {std::pair{true, false}, std::pair{true, true}, std::pair{false, false}}) {
      const auto theirs = ExpectedIds(expected, *v.tokenizer, add_special, parse_special);
      n_ids += theirs.size();
      EXPECT_EQ(v.tokenizer->Encode(text, add_special, parse_special), theirs)
          << v.name << ": " << name << " (add_special " << add_special << ", parse_special "
          << parse_special << ")";
    }
    for (const bool parse_special : {false, true}) {
      const auto ids = ExpectedIds(expected, *v.tokenizer, true, parse_special);
      for (const bool special : {false, true}) {
        const bool same = !expected.contains("ids_parse_special");  // then the texts are too
        const std::string key = std::string(parse_special && !same ? "text_parse" : "text") +
                                (special ? "_special" : "");
        EXPECT_TRUE(Pieces(*v.tokenizer, ids, special) == ApplyEdit(expected.at(key), text))
            << v.name << ": " << name << ": pieces differ from llama.cpp's " << key;
        n_texts++;
      }
    }
    // Decode strips the prefix space as llama_detokenize does, from the first token's piece.
    const auto ids = expected.at("ids").get<std::vector<int32_t>>();
    const std::string detokenized = expected.contains("detokenized")
                                        ? ApplyEdit(expected.at("detokenized"), text)
                                        : ApplyEdit(expected.at("text"), text);
    EXPECT_TRUE(v.tokenizer->Decode(ids) == detokenized)
        << v.name << ": " << name << ": Decode differs from llama_detokenize";
    n_texts++;
  }
  std::printf("t5 %s: %zu inputs, %zu ids and %zu decoded texts compared\n", v.name.c_str(),
              cases.size(), n_ids, n_texts);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, T5Tokenizer,
                         ::testing::Values("nfkc", "nfkc-no-charsmap", "identity",
                                           "nfkc-fi-user-defined", "hf-nfkc", "hf-nfkc-no-charsmap",
                                           "hf-identity", "hf-nfkc-fi-user-defined"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST_F(T5Tokenizer, ModelFlagsAndPieces) {
  const Tokenizer& t5 = *variant("nfkc").tokenizer;
  const Vocab& v = t5.vocab();
  EXPECT_EQ(t5.model_name(), "t5");
  EXPECT_EQ(t5.bos(), kNoToken);
  EXPECT_EQ(t5.eos(), 1);
  EXPECT_EQ(t5.unk(), 2);
  EXPECT_EQ(t5.pad(), 0);
  EXPECT_FALSE(t5.add_bos());
  EXPECT_TRUE(t5.add_eos());
  EXPECT_TRUE(t5.add_space_prefix());
  EXPECT_TRUE(v.remove_extra_whitespaces());
  EXPECT_TRUE(t5.IsEndOfGeneration(1));
  EXPECT_EQ(t5.TokenPiece(1), "");
  EXPECT_EQ(t5.TokenPiece(1, true), "</s>");
  EXPECT_EQ(t5.TokenPiece(2), "");  // unknown: nothing, as llama.cpp gives
  EXPECT_EQ(t5.TokenPiece(2, true), "<unk>");
  EXPECT_EQ(t5.TokenPiece(v.Find("<extra_id_0>")), "<extra_id_0>");  // user-defined, as written
  EXPECT_EQ(t5.TokenPiece(v.Find("[PAD1003]")), "");                 // unused
  EXPECT_EQ(t5.TokenPiece(v.Find("\u2581the")), " the");

  const Tokenizer& identity = *variant("identity").tokenizer;
  EXPECT_EQ(identity.bos(), 1);
  EXPECT_EQ(identity.eos(), 2);
  EXPECT_TRUE(identity.add_bos());
  EXPECT_FALSE(identity.add_eos());
  EXPECT_FALSE(identity.add_space_prefix());
  EXPECT_FALSE(identity.vocab().remove_extra_whitespaces());
  EXPECT_EQ(identity.TokenPiece(identity.vocab().Find("<0x41>")), "A");  // byte token
}

// A folder's tokenizer.ggml.* keys are the GGUF file's, type and value: the tokens, scores and
// types, the charsmap byte for byte, the flags and the special ids. The one key more is
// add_eos_token true, from T5's post_processor ($A </s>), which the converter writes and the test
// files leave to llama.cpp's t5 default (true).
TEST_F(T5Tokenizer, FolderKeysEqualTheFiles) {
  for (const char* name : {"nfkc", "nfkc-no-charsmap", "identity", "nfkc-fi-user-defined"}) {
    const Variant& folder_variant = variant(std::string("hf-") + name);
    const Variant& file_variant = variant(name);
    auto folder = GgufFile::Parse(folder_variant.image.data(), folder_variant.image.size(), "hf");
    auto file = GgufFile::Parse(file_variant.image.data(), file_variant.image.size(), "file");
    ASSERT_TRUE(folder.ok() && file.ok());
    size_t n_keys = 0;
    for (const auto& [key, value] : file->metadata()) {
      if (!key.starts_with("tokenizer.")) continue;
      const GgufValue* mine = folder->Find(key);
      ASSERT_NE(mine, nullptr) << name << ": " << key;
      EXPECT_EQ(mine->type, value.type) << name << ": " << key;
      EXPECT_EQ(mine->array_type, value.array_type) << name << ": " << key;
      EXPECT_EQ(mine->u, value.u) << name << ": " << key;
      EXPECT_EQ(mine->str, value.str) << name << ": " << key;
      ASSERT_EQ(mine->array_size, value.array_size) << name << ": " << key;
      if (value.type == GgufValueType::kArray && value.array_type == GgufValueType::kString) {
        EXPECT_EQ(folder->GetStringArray(key).value(), file->GetStringArray(key).value()) << key;
      } else if (value.type == GgufValueType::kArray) {
        const uint64_t bytes = value.array_size * GgufScalarBytes(value.array_type);
        EXPECT_EQ(std::memcmp(mine->array_data, value.array_data, bytes), 0) << name << ": " << key;
      }
      ++n_keys;
    }
    for (const auto& [key, value] : folder->metadata()) {
      if (!key.starts_with("tokenizer.") || file->Find(key) != nullptr) continue;
      EXPECT_EQ(key, "tokenizer.ggml.add_eos_token") << name;
      EXPECT_TRUE(folder->GetBool(key).value()) << name << ": " << key;
    }
    EXPECT_GE(n_keys, 9u) << name;
  }
}

// hf-nfkc/ is what transformers 5.25.0 saves for the nfkc spiece.model (make_hf_tokenizer.py):
// the Precompiled normalizer alone, WhitespaceSplit then Metaspace, </s> appended, and T5's
// layout (the 4 <extra_id_N> right after the 1,000 pieces at score 0, no padding). <sep>, a
// user-defined piece that transformers 5 does not list among added_tokens, is a normal token
// there (as llama.cpp's converter makes it too). So its GGUF differs from vocab-nfkc.json's in
// those ids, and every input that holds none of them must give llama.cpp's ids for that file.
TEST_F(T5Tokenizer, TransformersFolderGivesLlamaCppIds) {
  auto folder = HfTokenizer::LoadFolder(testing::TestDataPath("t5-tokenizer/hf-nfkc"), {});
  ASSERT_TRUE(folder.ok()) << folder.message();
  GgufWriter writer;
  writer.SetString("general.architecture", "t5");
  folder->AddTo(writer);
  const std::vector<uint8_t> image = writer.Serialize();
  auto view = GgufFile::Parse(image.data(), image.size(), "hf-nfkc");
  ASSERT_TRUE(view.ok()) << view.message();
  const Variant& nfkc = variant("nfkc");
  auto file = GgufFile::Parse(nfkc.image.data(), nfkc.image.size(), "nfkc");
  ASSERT_TRUE(file.ok()) << file.message();
  const auto tokens = view->GetStringArray("tokenizer.ggml.tokens").value();
  const auto scores = view->GetFloatArray("tokenizer.ggml.scores").value();
  const auto types = view->GetIntArray("tokenizer.ggml.token_type").value();
  const auto file_tokens = file->GetStringArray("tokenizer.ggml.tokens").value();
  const auto file_scores = file->GetFloatArray("tokenizer.ggml.scores").value();
  const auto file_types = file->GetIntArray("tokenizer.ggml.token_type").value();
  ASSERT_EQ(tokens.size(), 1004u);
  for (size_t id = 0; id < 1000; ++id) {
    EXPECT_EQ(tokens[id], file_tokens[id]) << id;
    EXPECT_EQ(scores[id], file_scores[id]) << id;
    EXPECT_EQ(types[id], id == 3 ? 1 : file_types[id]) << id;  // <sep>: normal
  }
  for (size_t id = 1000; id < 1004; ++id) {
    EXPECT_EQ(tokens[id], "<extra_id_" + std::to_string(1003 - id) + ">");
    EXPECT_EQ(scores[id], -1000.0f);
    EXPECT_EQ(types[id], 4);
  }
  for (const char* key : {"tokenizer.ggml.precompiled_charsmap", "tokenizer.ggml.model",
                          "tokenizer.ggml.add_space_prefix",
                          "tokenizer.ggml.remove_extra_whitespaces", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    const GgufValue* mine = view->Find(key);
    const GgufValue* theirs = file->Find(key);
    ASSERT_TRUE(mine != nullptr && theirs != nullptr) << key;
    EXPECT_EQ(mine->u, theirs->u) << key;
    EXPECT_EQ(mine->str, theirs->str) << key;
    ASSERT_EQ(mine->array_size, theirs->array_size) << key;
    if (mine->array_size > 0) {  // scalars have no array bytes (null pointers)
      EXPECT_EQ(std::memcmp(mine->array_data, theirs->array_data, mine->array_size), 0) << key;
    }
  }
  auto tokenizer = Tokenizer::FromGguf(*view);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const auto reference = ReadJson("t5-tokenizer/reference-nfkc.json").at("cases");
  const auto inputs = ReadJson("t5-tokenizer/inputs.json");
  size_t n_inputs = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string text = InputText(inputs[i]);
    if (text.find("<sep>") != std::string::npos || text.find("<extra_id") != std::string::npos ||
        text.find("[PAD") != std::string::npos) {
      continue;
    }
    for (const auto& [add_special, parse_special] :
         {std::pair{true, false}, std::pair{true, true}, std::pair{false, false}}) {
      EXPECT_EQ((*tokenizer)->Encode(text, add_special, parse_special),
                ExpectedIds(reference[i], **tokenizer, add_special, parse_special))
          << inputs[i].at("name") << " (add_special " << add_special << ", parse_special "
          << parse_special << ")";
    }
    ++n_inputs;
  }
  EXPECT_EQ(n_inputs, 64u);
}

// decode(encode(x)) == x wherever normalization leaves x as it is: with the identity vocabulary,
// every valid UTF-8 input whose characters are all tokens and that holds no ▁ (a literal ▁ reads
// as a space, as in SentencePiece); with nfkc, texts of single spaces between words and nothing
// nmt_nfkc changes (the prefix space comes off again when decoding).
TEST_F(T5Tokenizer, RoundTrips) {
  const Tokenizer& identity = *variant("identity").tokenizer;
  size_t n_round_trips = 0;
  for (const auto& input : ReadJson("t5-tokenizer/inputs.json")) {
    const std::string text = InputText(input);
    const std::vector<int32_t> ids = identity.Encode(text, true, false);
    if (!IsValidUtf8(text) || text.find("\u2581") != std::string::npos ||
        std::count(ids.begin(), ids.end(), identity.unk()) > 0) {
      continue;
    }
    EXPECT_EQ(identity.Decode(ids), text) << input.at("name");
    ++n_round_trips;
  }
  EXPECT_EQ(n_round_trips, 33u);
  const Tokenizer& t5 = *variant("nfkc").tokenizer;
  for (const char* text : {"Hello world", "The quick brown fox jumps over the lazy dog.",
                           "def f(x): return x * 2", "1 22 333 4444", "hello<sep> world"}) {
    for (const bool add_special : {false, true}) {
      EXPECT_EQ(t5.Decode(t5.Encode(text, add_special, false)), text) << text;
    }
  }
}

// A t5 file with nothing but its tokens: llama.cpp's defaults (</s> 1 added, <unk> 2, <pad> 0, no
// BOS, no prefix space, whitespace kept).
TEST(T5TokenizerDefaults, FileWithOnlyTokens) {
  GgufWriter writer;
  writer.SetString("tokenizer.ggml.model", "t5");
  writer.SetStringArray("tokenizer.ggml.tokens",
                        {"<pad>", "</s>", "<unk>", "a", "b", "\u2581", "\u2581a"});
  writer.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -1, -2, -1.5f});
  writer.SetInt32Array("tokenizer.ggml.token_type", {3, 3, 2, 1, 1, 1, 1});
  const std::vector<uint8_t> image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "t5-defaults.gguf");
  ASSERT_TRUE(file.ok()) << file.message();
  auto tokenizer = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const Tokenizer& t = **tokenizer;
  EXPECT_EQ(t.bos(), kNoToken);
  EXPECT_EQ(t.eos(), 1);
  EXPECT_EQ(t.unk(), 2);
  EXPECT_EQ(t.pad(), 0);
  EXPECT_FALSE(t.add_space_prefix());
  // "▁a" (-1.5) beats "▁" + "a" (-3); two spaces stay two; "c" and "d" are one <unk>.
  EXPECT_EQ(t.Encode("a  a cd", true, false), (std::vector<int32_t>{3, 5, 6, 5, 2, 1}));
  EXPECT_EQ(t.Encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(t.Encode("", false, false), (std::vector<int32_t>{}));
}

// A bad tokenizer.ggml.precompiled_charsmap is refused with the key and the sizes.
TEST(T5TokenizerDefaults, RefusesBadCharsmaps) {
  struct Case {
    std::vector<uint8_t> blob;
    std::string message;
  };
  const Case cases[] = {
      {{1, 0, 0}, "3 bytes, shorter than its 4-byte header"},
      {{4, 0, 0, 0, 0, 0, 0, 0}, "a trie of 4 bytes leaves no room for replacements in 8 bytes"},
      {{4, 0, 0, 0, 0, 0, 0, 0, 'a'}, "the replacement strings (1 bytes) do not end with NUL"},
  };
  for (const Case& c : cases) {
    GgufWriter writer;
    writer.SetString("tokenizer.ggml.model", "t5");
    writer.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "</s>", "<unk>", "a"});
    GgufValue value;
    value.type = GgufValueType::kArray;
    value.array_type = GgufValueType::kUint8;
    value.array_size = c.blob.size();
    value.array_data = c.blob.data();
    writer.CopyValue("tokenizer.ggml.precompiled_charsmap", value);
    const std::vector<uint8_t> image = writer.Serialize();
    auto file = GgufFile::Parse(image.data(), image.size(), "t5-bad.gguf");
    ASSERT_TRUE(file.ok()) << file.message();
    auto tokenizer = Tokenizer::FromGguf(*file);
    ASSERT_FALSE(tokenizer.ok()) << c.message;
    EXPECT_EQ(tokenizer.message(), "tokenizer.ggml.precompiled_charsmap: " + c.message);
  }
  GgufWriter writer;
  writer.SetString("tokenizer.ggml.model", "t5");
  writer.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "</s>", "<unk>", "a"});
  writer.SetString("tokenizer.ggml.precompiled_charsmap", "not bytes");
  const std::vector<uint8_t> image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "t5-bad.gguf");
  ASSERT_TRUE(file.ok()) << file.message();
  auto tokenizer = Tokenizer::FromGguf(*file);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.message().find("tokenizer.ggml.precompiled_charsmap: expected an array of "
                                     "uint8 or int8"),
            std::string::npos)
      << tokenizer.message();
}

}  // namespace
}  // namespace kvserve
