// Tokenizers read from GGUF: llama.cpp's vocabulary test vectors (exact ids), the reference
// prompts, round trips over random text, streaming decode at every split point, special tokens,
// 1 MB inputs, bad metadata, and the `kvserve tokenize` command.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "support/paths.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/utf8.h"

namespace kvserve {
namespace {

using ::kvserve::testing::KvserveBinary;
using ::kvserve::testing::ModelPath;
using ::kvserve::testing::ReferencePath;
using ::kvserve::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Loads a tokenizer; the GgufFile is dropped on purpose, since the tokenizer must not need it.
std::unique_ptr<Tokenizer> Load(const std::string& name) {
  auto file = GgufFile::Open(ModelPath(name));
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (!tokenizer.ok()) return nullptr;
  return std::move(*tokenizer);
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += " " + std::to_string(id);
  return out;
}

// llama.cpp's vocabulary test vectors: .inp holds strings each followed by the separator, .out one
// line of space-prefixed ids per string (no BOS/EOS, no special-token parsing).
void CheckVocabVectors(const std::string& name) {
  auto tokenizer = Load(name);
  ASSERT_NE(tokenizer, nullptr);
  const std::string inp = ReadFile(ModelPath(name + ".inp"));
  const std::string out = ReadFile(ModelPath(name + ".out"));
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
  ASSERT_GT(inputs.size(), 20u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t> ids = tokenizer->Encode(inputs[i], false, false);
    EXPECT_EQ(Join(ids), expected[i]) << "input " << i << ": '" << inputs[i] << "'";
    EXPECT_EQ(tokenizer->Decode(ids), inputs[i]) << "input " << i;
  }
}

TEST(TokenizerTest, Gpt2VocabVectorsMatchLlamaCpp) { CheckVocabVectors("ggml-vocab-gpt-2.gguf"); }

TEST(TokenizerTest, LlamaSpmVocabVectorsMatchLlamaCpp) {
  CheckVocabVectors("ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerTest, MetadataOfTheRealVocabularies) {
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto spm = Load("stories260K.gguf");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(gpt2->model_name(), "gpt2");
  EXPECT_EQ(gpt2->n_vocab(), 50257);
  EXPECT_EQ(gpt2->bos(), 50256);
  EXPECT_EQ(gpt2->eos(), 50256);
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_TRUE(gpt2->IsEndOfGeneration(50256));
  EXPECT_FALSE(gpt2->IsEndOfGeneration(13));
  EXPECT_EQ(spm->model_name(), "llama");
  EXPECT_EQ(spm->n_vocab(), 512);
  EXPECT_EQ(spm->bos(), 1);
  EXPECT_EQ(spm->eos(), 2);
  EXPECT_EQ(spm->unk(), 0);
  EXPECT_EQ(spm->pad(), kNoToken);  // stored as 0xFFFFFFFF
  EXPECT_TRUE(spm->add_bos());
  EXPECT_TRUE(spm->IsEndOfGeneration(2));
  EXPECT_FALSE(spm->IsEndOfGeneration(1));
}

TEST(TokenizerTest, TokenPieces) {
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto spm = Load("stories260K.gguf");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(gpt2->TokenPiece(2402), " upon");  // "Ġupon"
  EXPECT_EQ(gpt2->TokenPiece(198), "\n");      // "Ċ"
  EXPECT_EQ(gpt2->TokenPiece(50256), "");      // control
  EXPECT_EQ(gpt2->TokenPiece(50256, true), "<|endoftext|>");
  EXPECT_EQ(spm->TokenPiece(403), " Once");      // "▁Once"
  EXPECT_EQ(spm->TokenPiece(3 + 0x0A), "\n");    // "<0x0A>"
  EXPECT_EQ(spm->TokenPiece(3 + 0xE2), "\xE2");  // half a character
  EXPECT_EQ(spm->TokenPiece(1), "");
  EXPECT_EQ(spm->TokenPiece(1, true), "<s>");
  EXPECT_EQ(spm->TokenPiece(-1), "");
  EXPECT_EQ(spm->TokenPiece(512), "");
}

// The reference prompts were tokenized by llama.cpp: decoding them and encoding the text again
// must give the same ids.
TEST(TokenizerTest, ReferencePromptsRoundTrip) {
  const struct {
    const char* model;
    const char* reference;
    const char* text;
  } cases[] = {
      {"stories260K.gguf", "stories260K-a.json", "Once upon a time"},
      {"gpt2-tiny-f32.gguf", "gpt2-tiny-a.json", nullptr},
      {"gpt2-tiny-f32.gguf", "gpt2-tiny-b.json", nullptr},
  };
  for (const auto& c : cases) {
    auto tokenizer = Load(c.model);
    ASSERT_NE(tokenizer, nullptr);
    const auto json = nlohmann::json::parse(ReadFile(ReferencePath(c.reference)));
    const std::vector<int32_t> ids = json.at("prompt_tokens").get<std::vector<int32_t>>();
    const std::string text = tokenizer->Decode(ids);
    if (c.text != nullptr) {
      EXPECT_EQ(text, c.text) << c.reference;
    }
    EXPECT_EQ(tokenizer->Encode(text, /*add_special=*/true, false), ids)
        << c.reference << ": '" << text << "'";
  }
}

TEST(TokenizerTest, OnceUponATime) {
  auto spm = Load("stories260K.gguf");
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto gpt2_vocab = Load("ggml-vocab-gpt-2.gguf");
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(gpt2_vocab, nullptr);
  const std::string text = "Once upon a time";
  EXPECT_EQ(spm->Encode(text, true, false), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(spm->Encode(text, false, false), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(gpt2->Encode(text, true, false), (std::vector<int32_t>{7454, 2402, 257, 640}));
  for (const std::string& s :
       {text, std::string("Lily and Ben went to the park. \"Hi!\" she said."),
        std::string("  two leading spaces\n\nand\ttabs  "),
        std::string("naïve café — 日本語 🙂")}) {
    for (bool add_special : {false, true}) {
      EXPECT_EQ(spm->Decode(spm->Encode(s, add_special, false)), s) << s;
      EXPECT_EQ(gpt2->Decode(gpt2->Encode(s, add_special, false)), s) << s;
    }
    EXPECT_EQ(gpt2->Encode(s, false, false), gpt2_vocab->Encode(s, false, false));
  }
}

TEST(TokenizerTest, EmptyText) {
  auto spm = Load("stories260K.gguf");
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(gpt2, nullptr);
  EXPECT_TRUE(spm->Encode("", false, false).empty());
  EXPECT_EQ(spm->Encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(gpt2->Encode("", true, true).empty());
  EXPECT_EQ(spm->Decode(std::vector<int32_t>{}), "");
}

TEST(TokenizerTest, SpecialTokenParsing) {
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto spm = Load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  const std::string text = "Hello<|endoftext|>world<|endoftext|>";
  const std::vector<int32_t> parsed = gpt2->Encode(text, false, true);
  EXPECT_EQ(parsed, (std::vector<int32_t>{15496, 50256, 6894, 50256}));
  const std::vector<int32_t> plain = gpt2->Encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(gpt2->Decode(plain), text);
  EXPECT_EQ(gpt2->Decode(parsed), "Helloworld");
  EXPECT_EQ(gpt2->Decode(parsed, /*render_special=*/true), text);

  // SentencePiece: a special token ends the text before it and the text after it gets the prefix
  // space again, as in llama.cpp.
  const std::vector<int32_t> spm_parsed = spm->Encode("<s>Hello</s>", false, true);
  ASSERT_EQ(spm_parsed.size(), 3u);
  EXPECT_EQ(spm_parsed.front(), 1);
  EXPECT_EQ(spm_parsed.back(), 2);
  EXPECT_EQ(spm->TokenPiece(spm_parsed[1]), " Hello");
  const std::vector<int32_t> spm_plain = spm->Encode("<s>Hello</s>", false, false);
  EXPECT_GT(spm_plain.size(), 3u);
  for (int32_t id : spm_plain) EXPECT_FALSE(spm->IsControl(id)) << id;
  EXPECT_EQ(spm->Decode(spm_plain), "<s>Hello</s>");
  EXPECT_EQ(spm->Decode(spm_parsed, true), "<s> Hello</s>");
}

// Texts that llama.cpp treats as control tokens whatever the file's type are read out of the text
// only with parse_special. The ids are llama.cpp's (3f545becc, llama-tokenize --ids --no-bos
// --no-escape, with and without --no-parse-special).
TEST(TokenizerTest, ControlLookingTokensNeedParseSpecial) {
  auto phi3 = Load("vocab/ggml-vocab-phi-3.gguf");
  auto coder = Load("vocab/ggml-vocab-deepseek-coder.gguf");
  auto qwen2 = Load("vocab/ggml-vocab-qwen2.gguf");
  ASSERT_NE(phi3, nullptr);
  ASSERT_NE(coder, nullptr);
  ASSERT_NE(qwen2, nullptr);
  using Ids = std::vector<int32_t>;
  // Phi-3 stores its end-of-sequence text "</s>" (id 2) as user-defined.
  EXPECT_EQ(phi3->Encode("</s>", false, false), (Ids{1533, 29879, 29958}));  // "▁</" "s" ">"
  EXPECT_EQ(phi3->Encode("</s>", false, true), (Ids{2}));
  EXPECT_EQ(phi3->Decode(phi3->Encode("Hi</s>", false, false)), "Hi</s>");
  // DeepSeek-Coder's fill-in-the-middle markers are user-defined too.
  const std::string fim_begin = "<｜fim▁begin｜>";
  EXPECT_EQ(coder->Encode(fim_begin, false, false),
            (Ids{27, 169, 121, 237, 69, 308, 11028, 210, 946, 169, 121, 237, 29}));
  EXPECT_EQ(coder->Encode(fim_begin, false, true), (Ids{32016}));
  // Qwen 2's "</s>" is an ordinary token (128247) that llama.cpp reads as control.
  EXPECT_EQ(qwen2->Encode("</s>", false, false), (Ids{522, 82, 29}));
  EXPECT_EQ(qwen2->Encode("</s>", false, true), (Ids{128247}));
  // User-defined tokens that do not look like control are read out of any text, as in llama.cpp
  // and Hugging Face.
  EXPECT_EQ(qwen2->Encode("<tool_call>", false, false), (Ids{151657}));
  EXPECT_EQ(coder->Encode("<|EOT|>", false, false), (Ids{32021}));
}

// Phi-3 (general.name "Phi3") drops the whitespace after its special tokens, except after <unk>,
// <s> and <|endoftext|>, as llama.cpp and Phi-3's Hugging Face tokenizer do. The ids are
// llama.cpp's (3f545becc, llama-tokenize --ids --no-bos --no-escape).
TEST(TokenizerTest, Phi3SpecialTokensDropTheWhitespaceAfterThem) {
  auto phi3 = Load("vocab/ggml-vocab-phi-3.gguf");
  ASSERT_NE(phi3, nullptr);
  using Ids = std::vector<int32_t>;
  // A chat prompt: <|user|> "▁Hello" <|end|> <|assistant|>, no newline tokens.
  EXPECT_EQ(phi3->Encode("<|user|>\nHello<|end|>\n<|assistant|>\n", false, true),
            (Ids{32010, 15043, 32007, 32001}));
  EXPECT_EQ(phi3->Encode("</s>\t\n Hi", false, true), (Ids{2, 6324}));
  EXPECT_EQ(phi3->Encode("<s>\nHi", false, true), (Ids{1, 29871, 13, 18567}));
  EXPECT_EQ(phi3->Encode("<|endoftext|> Hi", false, true), (Ids{32000, 29871, 6324}));
  // Other vocabularies keep it: Llama SentencePiece's "</s>\nHi".
  auto spm = Load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(spm->Encode("</s>\nHi", false, true), (Ids{2, 29871, 13, 18567}));
}

TEST(TokenizerTest, PreTokenizerPatterns) {
  auto gpt2 = PreTokenizer::ForName("gpt-2");
  auto llama3 = PreTokenizer::ForName("llama-bpe");
  ASSERT_TRUE(gpt2.ok()) << gpt2.message();
  ASSERT_TRUE(llama3.ok()) << llama3.message();
  using Pieces = std::vector<std::string_view>;
  EXPECT_EQ(gpt2->Split("Hello 12345 world's IT'S  ok\n"),
            (Pieces{"Hello", " 12345", " world", "'s", " IT", "'", "S", " ", " ok", "\n"}));
  EXPECT_EQ(llama3->Split("Hello 12345 world's IT'S  ok\n"),
            (Pieces{"Hello", " ", "123", "45", " world", "'s", " IT", "'S", " ", " ok", "\n"}));
  // Invalid UTF-8 is kept, in its own piece, so the pieces still cover the input.
  EXPECT_EQ(gpt2->Split("ab\xFF\xFE cd"), (Pieces{"ab", "\xFF\xFE", " cd"}));
  EXPECT_FALSE(PreTokenizer::ForName("no-such-pre").ok());
  EXPECT_FALSE(PreTokenizer::FromPattern("(unclosed").ok());
}

// Random text from mixed scripts. `avoid_escape` leaves out U+2581, which SentencePiece cannot tell
// apart from an escaped space.
std::string RandomUnicode(std::mt19937& rng, size_t n_chars, bool avoid_escape) {
  static const std::pair<char32_t, char32_t> kRanges[] = {
      {0x20, 0x7E},     {0x09, 0x0A},     {0xA0, 0x17F},      {0x300, 0x36F},
      {0x391, 0x3C9},   {0x410, 0x44F},   {0x5D0, 0x5EA},     {0x627, 0x64A},
      {0x900, 0x97F},   {0x2000, 0x206F}, {0x2580, 0x2582},   {0x3040, 0x30FF},
      {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0x1F300, 0x1F64F}, {0x10000, 0x10FFFF}};
  std::string out;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& range = kRanges[rng() % std::size(kRanges)];
    char32_t cp = range.first + rng() % (range.second - range.first + 1);
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (avoid_escape && cp == 0x2581)) cp = 'x';
    AppendUtf8(cp, out);
  }
  return out;
}

TEST(TokenizerTest, RandomUnicodeRoundTrips) {
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto spm = Load("ggml-vocab-llama-spm.gguf");
  auto tiny_spm = Load("stories260K.gguf");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(tiny_spm, nullptr);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = rng() % 40;
    const std::string any = RandomUnicode(rng, n, false);
    EXPECT_EQ(gpt2->Decode(gpt2->Encode(any, false, false)), any);
    const std::string text = RandomUnicode(rng, n, true);
    EXPECT_EQ(spm->Decode(spm->Encode(text, false, false)), text);
    EXPECT_EQ(spm->Decode(spm->Encode(text, true, false)), text);
    EXPECT_EQ(tiny_spm->Decode(tiny_spm->Encode(text, true, false)), text);
  }
}

TEST(TokenizerTest, RandomBytesRoundTrip) {
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  auto spm = Load("stories260K.gguf");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_EQ(gpt2->Decode(gpt2->Encode(bytes, false, false)), bytes);
    if (bytes.find("\xE2\x96\x81") == std::string::npos) {
      EXPECT_EQ(spm->Decode(spm->Encode(bytes, false, false)), bytes);
    }
  }
}

TEST(Utf8Test, SanitizerReplacesInvalidBytes) {
  EXPECT_EQ(SanitizeUtf8("plain ascii"), "plain ascii");
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x99\x82"), "\xF0\x9F\x99\x82");
  EXPECT_EQ(SanitizeUtf8("a\xE2\x82"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");                                                   // truncated, then a letter
  EXPECT_EQ(SanitizeUtf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two bad bytes
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"), "\xEF\xBF\xBD");  // truncated at the end: one U+FFFD
  EXPECT_EQ(SanitizeUtf8("\xFF"), "\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8("héllo 🙂"));
  EXPECT_FALSE(IsValidUtf8("h\xC3"));
}

TEST(Utf8Test, SanitizerIsIndependentOfHowBytesAreSplit) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 2 ? rng() : 0x80 + rng() % 0x78);
    const std::string whole = SanitizeUtf8(bytes);
    Utf8Sanitizer sanitizer;
    std::string pieces;
    for (size_t i = 0; i < bytes.size();) {
      const size_t n = std::min<size_t>(rng() % 4, bytes.size() - i);
      pieces += sanitizer.Feed(std::string_view(bytes).substr(i, n));
      i += n;
    }
    pieces += sanitizer.Finish();
    EXPECT_EQ(pieces, whole);
    EXPECT_TRUE(IsValidUtf8(whole));
  }
}

// For every prefix of `ids`: pushing it token by token and flushing gives the sanitized whole
// decode of that prefix, and what Push returns is always complete UTF-8.
void CheckStreamingAtEverySplit(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (size_t split = 0; split <= ids.size(); ++split) {
    StreamingDecoder decoder(tokenizer);
    std::string streamed;
    for (size_t i = 0; i < split; ++i) {
      const std::string part = decoder.Push(ids[i]);
      EXPECT_TRUE(IsValidUtf8(part));
      streamed += part;
      EXPECT_LT(decoder.pending_bytes(), 4);
    }
    streamed += decoder.Flush();
    const std::span<const int32_t> prefix(ids.data(), split);
    EXPECT_EQ(streamed, SanitizeUtf8(tokenizer.Decode(prefix))) << "split " << split;
  }
}

TEST(StreamingDecoderTest, MatchesDecodeAtEverySplit) {
  auto spm = Load("stories260K.gguf");
  auto gpt2 = Load("gpt2-tiny-f32.gguf");
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(gpt2, nullptr);
  const std::string text = " Once upon a time 日本語 🙂 café, ½ months\nend";
  // stories260K has no CJK or emoji pieces: those become <0xNN> byte tokens, one per byte.
  const std::vector<int32_t> spm_ids = spm->Encode(text, true, false);
  int byte_tokens = 0;
  for (int32_t id : spm_ids) byte_tokens += spm->vocab().type(id) == TokenType::kByte;
  EXPECT_GE(byte_tokens, 13);
  CheckStreamingAtEverySplit(*spm, spm_ids);
  CheckStreamingAtEverySplit(*gpt2, gpt2->Encode(text, false, false));

  // Whole streams equal the whole decode, including the stripped SentencePiece prefix space.
  StreamingDecoder decoder(*spm);
  std::string streamed;
  for (int32_t id : spm_ids) streamed += decoder.Push(id);
  streamed += decoder.Flush();
  EXPECT_EQ(streamed, text);
}

TEST(StreamingDecoderTest, InvalidSequencesBecomeReplacementCharacters) {
  auto spm = Load("stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  const int32_t kByte0 = 3;  // <0x00> in this vocabulary
  // 'é' is C3 A9. A lone C3 followed by a letter, and a lone A9: each is one U+FFFD.
  const std::vector<int32_t> ids = {kByte0 + 0xC3, kByte0 + 0xA9, kByte0 + 0xC3, kByte0 + 'x',
                                    kByte0 + 0xA9, kByte0 + 0xE2, kByte0 + 0x82};
  CheckStreamingAtEverySplit(*spm, ids);
  StreamingDecoder decoder(*spm);
  std::string out;
  for (int32_t id : ids) out += decoder.Push(id);
  EXPECT_EQ(out, "é\xEF\xBF\xBDx\xEF\xBF\xBD");
  EXPECT_EQ(decoder.pending_bytes(), 2);
  EXPECT_EQ(decoder.Flush(), "\xEF\xBF\xBD");

  // Random token sequences (any ids, byte tokens over-represented) at every split.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> random_ids(rng() % 12);
    for (int32_t& id : random_ids) id = rng() % 2 ? 3 + rng() % 256 : rng() % spm->n_vocab();
    CheckStreamingAtEverySplit(*spm, random_ids);
  }
}

TEST(StreamingDecoderTest, ContinuationKeepsLeadingSpace) {
  auto spm = Load("stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  StreamingDecoder decoder(*spm, {.at_text_start = false});
  EXPECT_EQ(decoder.Push(407), " upon");
  StreamingDecoder fresh(*spm);
  EXPECT_EQ(fresh.Push(1), "");  // BOS produces nothing and does not use up the rule
  EXPECT_EQ(fresh.Push(403), "Once");
  EXPECT_EQ(fresh.Push(407), " upon");
}

// 1 MB inputs: one repeated letter (one huge pre-token) and random bytes. They must finish
// (quadratic merging would take minutes); the time is printed, not asserted.
TEST(TokenizerTest, MegabyteInputsComplete) {
  const struct {
    const char* model;
  } models[] = {{"gpt2-tiny-f32.gguf"}, {"stories260K.gguf"}, {"ggml-vocab-llama-spm.gguf"}};
  std::mt19937 rng(42);
  const std::string random = [&rng] {
    std::string bytes(1 << 20, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    return bytes;
  }();
  const std::string letters(1 << 20, 'a');
  const std::string spaces(1 << 20, ' ');
  // The Llama 3 split has the alternative most prone to backtracking (\s*[\r\n]+).
  auto llama3 = PreTokenizer::ForName("llama-bpe");
  ASSERT_TRUE(llama3.ok()) << llama3.message();
  for (const std::string* text : {&letters, &random, &spaces}) {
    std::string joined;
    for (std::string_view piece : llama3->Split(*text)) joined.append(piece);
    EXPECT_EQ(joined, *text);
  }
  for (const auto& m : models) {
    auto tokenizer = Load(m.model);
    ASSERT_NE(tokenizer, nullptr);
    for (const auto& [name, text] : {std::pair{"letters", &letters}, std::pair{"random", &random},
                                     std::pair{"spaces", &spaces}}) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<int32_t> ids = tokenizer->Encode(*text, false, false);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("[ timing ] %s, 1 MiB of %s: %zu tokens in %.3f s\n", m.model, name, ids.size(),
                  seconds);
      EXPECT_FALSE(ids.empty());
      if (std::string(name) != "random" || tokenizer->model_name() == "gpt2") {
        EXPECT_EQ(tokenizer->Decode(ids), *text) << m.model << " " << name;
      }
    }
  }
}

// --- Hand-built vocabularies: merge order and error messages
// --------------------------------------

GgufWriter Gpt2Writer(std::vector<std::string> tokens, std::vector<std::string> merges) {
  GgufWriter writer;
  writer.SetString("tokenizer.ggml.model", "gpt2");
  writer.SetString("tokenizer.ggml.pre", "gpt-2");
  writer.SetStringArray("tokenizer.ggml.tokens", tokens);
  writer.SetStringArray("tokenizer.ggml.merges", merges);
  return writer;
}

Result<std::unique_ptr<Tokenizer>> FromWriter(const GgufWriter& writer,
                                              std::vector<uint8_t>& storage) {
  storage = writer.Serialize();
  auto file = GgufFile::Parse(storage.data(), storage.size(), "memory.gguf");
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(*file);
}

TEST(TokenizerTest, BpeMergesLowestRankFirstAndLeftmostOnTies) {
  std::vector<uint8_t> storage;
  // "b c" outranks "a b": "abc" -> a + bc; "aaa" -> aa + a (the leftmost pair wins a tie).
  auto tokenizer = FromWriter(
      Gpt2Writer({"a", "b", "c", "bc", "ab", "aa", "abc"}, {"b c", "a b", "a a", "ab c"}), storage);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  EXPECT_EQ((*tokenizer)->Encode("abc", false, false), (std::vector<int32_t>{0, 3}));
  EXPECT_EQ((*tokenizer)->Encode("ab", false, false), (std::vector<int32_t>{4}));
  EXPECT_EQ((*tokenizer)->Encode("aaa", false, false), (std::vector<int32_t>{5, 0}));
  EXPECT_EQ((*tokenizer)->Encode("aaaa", false, false), (std::vector<int32_t>{5, 5}));
}

TEST(TokenizerTest, SpmMergesHighestScoreFirst) {
  GgufWriter writer;
  writer.SetString("tokenizer.ggml.model", "llama");
  writer.SetStringArray("tokenizer.ggml.tokens",
                        {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab", "bc",
                         "\xE2\x96\x81"
                         "a"});
  writer.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -1, -1, -1, -5, -2, -3});
  writer.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  std::vector<uint8_t> storage;
  auto tokenizer = FromWriter(writer, storage);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  // "▁abc": bc (-2) beats ▁a (-3) beats ab (-5): ▁a + bc. Then "d" has no piece and no byte
  // tokens: <unk>.
  EXPECT_EQ((*tokenizer)->Encode("abc", true, false), (std::vector<int32_t>{1, 9, 8}));
  EXPECT_EQ((*tokenizer)->Encode("abd", false, false), (std::vector<int32_t>{9, 5, 0}));
}

TEST(TokenizerTest, BadMetadataIsAnErrorNamingKeyAndValue) {
  const auto expect_error = [](const GgufWriter& writer, const std::vector<std::string>& parts) {
    std::vector<uint8_t> storage;
    auto tokenizer = FromWriter(writer, storage);
    ASSERT_FALSE(tokenizer.ok());
    for (const std::string& part : parts) {
      EXPECT_NE(tokenizer.message().find(part), std::string::npos)
          << "'" << tokenizer.message() << "' lacks '" << part << "'";
    }
  };
  GgufWriter no_tokens;
  no_tokens.SetString("tokenizer.ggml.model", "gpt2");
  expect_error(no_tokens, {"tokenizer.ggml.tokens"});

  expect_error(Gpt2Writer({"a", "b", "ab"}, {"a b", "a zz"}),
               {"tokenizer.ggml.merges[1]", "'a zz'", "'zz'"});
  expect_error(Gpt2Writer({"a", "b"}, {"a b"}), {"tokenizer.ggml.merges[0]", "'ab'"});
  expect_error(Gpt2Writer({"a", "b", "ab"}, {"ab"}), {"tokenizer.ggml.merges[0]", "'ab'"});

  GgufWriter bad_bos = Gpt2Writer({"a", "b", "ab"}, {"a b"});
  bad_bos.SetUint32("tokenizer.ggml.bos_token_id", 99);
  expect_error(bad_bos, {"tokenizer.ggml.bos_token_id", "99", "3 tokens"});

  GgufWriter bad_model = Gpt2Writer({"a"}, {});
  bad_model.SetString("tokenizer.ggml.model", "wordpiece");
  expect_error(bad_model, {"tokenizer.ggml.model", "wordpiece"});

  GgufWriter bad_pre = Gpt2Writer({"a"}, {});
  bad_pre.SetString("tokenizer.ggml.pre", "klingon");
  expect_error(bad_pre, {"tokenizer.ggml.pre", "klingon"});

  GgufWriter bad_scores;
  bad_scores.SetString("tokenizer.ggml.model", "llama");
  bad_scores.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  bad_scores.SetFloat32Array("tokenizer.ggml.scores", {0, 0});
  expect_error(bad_scores, {"tokenizer.ggml.scores", "2 scores", "3 tokens"});

  GgufWriter bad_type;
  bad_type.SetString("tokenizer.ggml.model", "llama");
  bad_type.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  bad_type.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 9});
  expect_error(bad_type, {"tokenizer.ggml.token_type[2]", "9"});

  GgufWriter bad_byte;
  bad_byte.SetString("tokenizer.ggml.model", "llama");
  bad_byte.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xZZ>"});
  bad_byte.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 6});
  expect_error(bad_byte, {"tokenizer.ggml.tokens[3]", "<0xZZ>"});
}

// --- The command ------------------------------------------------------------------------------

struct CommandResult {
  int exit_code;
  std::string out;
  std::string err;
};

CommandResult RunKvserve(const std::string& arguments) {
  const std::string out_path = TempDir() + "/tokenize.out";
  const std::string err_path = TempDir() + "/tokenize.err";
  const std::string command =
      "'" + KvserveBinary() + "' " + arguments + " >'" + out_path + "' 2>'" + err_path + "'";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out_path), ReadFile(err_path)};
}

TEST(TokenizeCommandTest, PrintsIds) {
  const std::string model = "-m '" + ModelPath("stories260K.gguf") + "'";
  CommandResult ids = RunKvserve("tokenize " + model + " --text 'Once upon a time' --add-special");
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, "1 403 407 261 378\n");

  CommandResult pieces = RunKvserve("tokenize " + model + " --text 'Once upon' --pieces");
  EXPECT_EQ(pieces.exit_code, 0) << pieces.err;
  EXPECT_EQ(pieces.out, "403\t Once\n407\t upon\n");

  const std::string text_file = TempDir() + "/prompt.txt";
  std::ofstream(text_file) << "Hello<|endoftext|>";
  CommandResult gpt2 = RunKvserve("tokenize -m '" + ModelPath("gpt2-tiny-f32.gguf") +
                                  "' --parse-special --text-file '" + text_file + "'");
  EXPECT_EQ(gpt2.exit_code, 0) << gpt2.err;
  EXPECT_EQ(gpt2.out, "15496 50256\n");
}

TEST(TokenizeCommandTest, ErrorsAreOneLineAndNonZero) {
  const std::string model = "-m '" + ModelPath("stories260K.gguf") + "'";
  for (const std::string& arguments :
       {std::string("tokenize -m /nonexistent/model.gguf --text hi"), "tokenize " + model,
        "tokenize " + model + " --text-file /nonexistent/prompt.txt",
        std::string("tokenize --text hi"), "tokenize " + model + " --text a --bogus"}) {
    CommandResult result = RunKvserve(arguments);
    EXPECT_NE(result.exit_code, 0) << arguments;
    EXPECT_TRUE(result.out.empty()) << arguments;
    ASSERT_FALSE(result.err.empty()) << arguments;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.err.rfind("kvserve tokenize: ", 0), 0u) << result.err;
  }
}

}  // namespace
}  // namespace kvserve
