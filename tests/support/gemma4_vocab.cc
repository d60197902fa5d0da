#include "support/gemma4_vocab.h"

#include <string>
#include <string_view>
#include <unordered_set>

#include "io/gguf_writer.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/utf8.h"

namespace kvserve::testing {

namespace {

constexpr std::string_view kSpaceMark = "\u2581";  // ▁

struct SpecialToken {
  const char* text;
  int32_t type;  // tokenizer.ggml.token_type
};

constexpr SpecialToken kSpecialTokens[] = {
    {"<pad>", 3},
    {"<eos>", 3},
    {"<bos>", 3},
    {"<unk>", 2},
    {"<|turn>", 3},
    {"<turn|>", 3},
    {"<|tool_response>", 4},
    {"<tool_response|>", 4},
    {"<|channel>", 4},
    {"<channel|>", 4},
    {"</s>", 3},
    {"<start_of_image>", 3},
    {"<unused0>", 5},
};

constexpr int kMissingByte = 0xF0;
constexpr int kLongestNewlineRun = 24;

// A byte-level token text as gemma4 writes it: raw bytes, spaces as ▁. Empty when the bytes are
// not valid UTF-8, already hold a ▁ (it would read as a space) or hold a NUL (llama.cpp reads
// token texts as C strings: "\0" would be an empty token to it).
std::string Converted(std::string_view byte_level) {
  const std::string raw = BpeEncoder::UnmapBytes(byte_level);
  if (raw.empty() || !IsValidUtf8(raw) || raw.find(kSpaceMark) != std::string::npos ||
      raw.find('\0') != std::string::npos) {
    return "";
  }
  std::string out;
  for (char c : raw) {
    if (c == ' ') {
      out.append(kSpaceMark);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

struct Tokens {
  std::vector<std::string> texts;
  std::vector<int32_t> types;
  std::unordered_set<std::string> known;
  void Add(std::string text, int32_t type) {
    if (!known.insert(text).second) return;
    texts.push_back(std::move(text));
    types.push_back(type);
  }
};

Tokens MakeTokens(const GgufFile& source) {
  Tokens tokens;
  for (const SpecialToken& special : kSpecialTokens) tokens.Add(special.text, special.type);
  for (int b = 0; b < 256; ++b) {
    if (b == kMissingByte) continue;
    constexpr char kHex[] = "0123456789ABCDEF";
    tokens.Add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 6);
  }
  const auto texts = source.GetStringArray("tokenizer.ggml.tokens");
  const auto types = source.GetIntArray("tokenizer.ggml.token_type");
  if (!texts.ok() || !types.ok()) return tokens;
  for (size_t id = 0; id < texts->size(); ++id) {
    if ((*types)[id] != 1) continue;
    std::string text = Converted((*texts)[id]);
    if (!text.empty()) tokens.Add(std::move(text), 1);
  }
  for (int n = 2; n <= kLongestNewlineRun; ++n) tokens.Add(std::string(n, '\n'), 1);
  return tokens;
}

std::vector<std::string> MakeMerges(const GgufFile& source, const Tokens& tokens) {
  std::vector<std::string> merges;
  const auto lines = source.GetStringArray("tokenizer.ggml.merges");
  if (!lines.ok()) return merges;
  for (std::string_view line : *lines) {
    const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) continue;
    const std::string left = Converted(line.substr(0, space));
    const std::string right = Converted(line.substr(space + 1));
    if (left.empty() || right.empty() || !tokens.known.contains(left) ||
        !tokens.known.contains(right) || !tokens.known.contains(left + right)) {
      continue;
    }
    merges.push_back(left + " " + right);
  }
  return merges;
}

}  // namespace

std::vector<uint8_t> Gemma4StyleVocab(const GgufFile& source) {
  const Tokens tokens = MakeTokens(source);
  GgufWriter writer(source.alignment());
  for (const auto& [key, value] : source.metadata()) {
    if (!key.starts_with("tokenizer.")) writer.CopyValue(key, value);
  }
  writer.SetString("general.name", "gemma4-style test vocabulary");
  writer.SetString("tokenizer.ggml.model", "gemma4");
  writer.SetString("tokenizer.ggml.pre", "gemma4");
  writer.SetStringArray("tokenizer.ggml.tokens", tokens.texts);
  std::vector<float> scores(tokens.texts.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  writer.SetFloat32Array("tokenizer.ggml.scores", scores);
  writer.SetInt32Array("tokenizer.ggml.token_type", tokens.types);
  writer.SetStringArray("tokenizer.ggml.merges", MakeMerges(source, tokens));
  writer.SetUint32("tokenizer.ggml.bos_token_id", 2);
  writer.SetUint32("tokenizer.ggml.eos_token_id", 1);
  writer.SetUint32("tokenizer.ggml.unknown_token_id", 3);
  writer.SetUint32("tokenizer.ggml.padding_token_id", 0);
  writer.SetBool("tokenizer.ggml.add_bos_token", false);
  writer.SetBool("tokenizer.ggml.add_space_prefix", false);
  return writer.Serialize();
}

}  // namespace kvserve::testing
