#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace kvserve {

namespace {

// GPT-2's split (OpenAI's encoder.py); the final \s+ catches whitespace before a non-space that
// the lookahead alternative leaves.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3 (tiktoken cl100k style): case-insensitive contractions, letters with one leading
// non-letter, digits in groups of at most three.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama 3 but single digits.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

struct PreTokenizer::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Result<PreTokenizer> PreTokenizer::ForName(std::string_view pre) {
  if (pre == "gpt-2" || pre == "default" || pre.empty()) return FromPattern(kGpt2Pattern);
  if (pre == "llama-bpe" || pre == "llama3") return FromPattern(kLlama3Pattern);
  if (pre == "qwen2") return FromPattern(kQwen2Pattern);
  return Result<PreTokenizer>::InvalidArgument("tokenizer.ggml.pre: unsupported pre-tokenizer '" +
                                               std::string(pre) +
                                               "' (supported: gpt-2, default, llama-bpe, qwen2)");
}

Result<PreTokenizer> PreTokenizer::FromPattern(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: invalid UTF-8 in the subject is never matched (it ends up in its own
  // piece) instead of failing the whole match.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Result<PreTokenizer>::InvalidArgument("pre-tokenizer pattern '" + std::string(pattern) +
                                                 "': " + reinterpret_cast<const char*>(message) +
                                                 " at offset " + std::to_string(error_offset));
  }
  // JIT is an optimisation only: if it is unavailable, the interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto holder = std::make_shared<Code>();
  holder->code = code;
  return PreTokenizer(std::string(pattern), std::move(holder));
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;  // first byte not yet assigned to a piece
  size_t offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), offset, 0, match, nullptr);
    if (rc < 0) break;  // no further match (or a resource limit): the rest is one piece
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t match_start = ovector[0];
    size_t match_end = ovector[1];
    if (match_start > start) pieces.push_back(text.substr(start, match_start - start));
    if (match_end == match_start) {
      // None of our patterns matches empty text, but a caller's might: step over one character
      // so the loop always advances.
      ++match_end;
      while (match_end < text.size() && (static_cast<uint8_t>(text[match_end]) & 0xC0) == 0x80) {
        ++match_end;
      }
    }
    pieces.push_back(text.substr(match_start, match_end - match_start));
    start = offset = match_end;
  }
  if (start < text.size()) pieces.push_back(text.substr(start));
  pcre2_match_data_free(match);
  return pieces;
}

}  // namespace kvserve
