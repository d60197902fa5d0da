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

// GPT-4o's o200k_base and gpt-oss's o200k_harmony (tiktoken's pattern, as their tokenizer.json
// has it): words by case (an optional capitalised run, then lower-case letters, or the reverse)
// with one leading non-letter and case-insensitive contractions, digits in groups of at most
// three, punctuation runs with trailing newlines or slashes. llama.cpp rewrites the case classes
// with ASCII lookaheads; this is the original, which tiktoken and Hugging Face run.
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Several vocabularies split in stages, as Hugging Face's Sequence of Split pre-tokenizers does:
// each pattern splits every piece the previous one produced, text between matches included. The
// stages are llama.cpp's (llama-vocab.cpp), which reproduce the Hugging Face ids of their test
// vectors. `$` in a stage means the end of that piece.

// GPT-2's split without the final \s+, as llama.cpp writes it inside staged lists.
constexpr std::string_view kGpt2Stage =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// CJK ideographs, the ranges between (U+0800..U+4E00) and Hangul, as one piece each run.
constexpr std::string_view kDeepseekCjkStage = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

constexpr std::string_view kDeepseekLlmStages[] = {
    "[\r\n]",
    // Cased letters of many scripts (no CJK), with one optional leading whitespace. Written as
    // PCRE escapes: some of these code points (U+1F7D, U+2126, ...) have NFC replacements that
    // an editor could silently substitute, which would put a range out of order.
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}"
    "\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+\\z",
    kDeepseekCjkStage,
    "\\p{N}+",
};

constexpr std::string_view kDeepseekCoderStages[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjkStage, "\\p{N}",
};

constexpr std::string_view kFalconStages[] = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    kGpt2Stage,
    "[0-9][0-9][0-9]",
};

// StarCoder, Refact, SmolLM, Command-R: every digit alone, then GPT-2's split.
constexpr std::string_view kStarcoderStages[] = {"\\p{N}", kGpt2Stage};

// llama.cpp's "default" BPE split, used for tokenizer.ggml.pre "default" and for files without
// the key (older conversions such as GPT-NeoX-20B): runs of punctuation and math symbols first,
// then GPT-2's split, then digit runs cut out of their pieces (" 12345" -> " ", "12345") and
// ASCII digits grouped in threes from the left ("12345" -> "123", "45"). [0-9], not \d: with
// PCRE2_UCP \d would also group other scripts' digits, which llama.cpp leaves whole.
constexpr std::string_view kDefaultStages[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    kGpt2Stage,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};

}  // namespace

struct PreTokenizer::Code {
  std::vector<pcre2_code*> stages;
  ~Code() {
    for (pcre2_code* code : stages) pcre2_code_free(code);
  }
};

Result<PreTokenizer> PreTokenizer::ForName(std::string_view pre) {
  if (pre == "gpt-2" || pre == "mpt" || pre == "gpt-neox") return FromPattern(kGpt2Pattern);
  if (pre == "default" || pre.empty()) return FromStages(kDefaultStages);
  if (pre == "llama-bpe" || pre == "llama3") return FromPattern(kLlama3Pattern);
  if (pre == "qwen2") return FromPattern(kQwen2Pattern);
  if (pre == "gpt-4o") return FromPattern(kGpt4oPattern);
  if (pre == "deepseek-llm") return FromStages(kDeepseekLlmStages);
  if (pre == "deepseek-coder") return FromStages(kDeepseekCoderStages);
  if (pre == "falcon") return FromStages(kFalconStages);
  if (pre == "starcoder" || pre == "refact" || pre == "smollm" || pre == "command-r") {
    return FromStages(kStarcoderStages);
  }
  return Result<PreTokenizer>::InvalidArgument(
      "tokenizer.ggml.pre: unsupported pre-tokenizer '" + std::string(pre) +
      "' (supported: gpt-2, default, mpt, gpt-neox, llama-bpe, llama3, qwen2, gpt-4o, "
      "deepseek-llm, deepseek-coder, falcon, starcoder, refact, smollm, command-r)");
}

Result<PreTokenizer> PreTokenizer::FromPattern(std::string_view pattern) {
  return FromStages(std::span<const std::string_view>(&pattern, 1));
}

Result<PreTokenizer> PreTokenizer::FromStages(std::span<const std::string_view> stages) {
  auto holder = std::make_shared<Code>();
  std::vector<std::string> patterns;
  for (std::string_view pattern : stages) {
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
      return Result<PreTokenizer>::InvalidArgument("pre-tokenizer pattern '" +
                                                   std::string(pattern) +
                                                   "': " + reinterpret_cast<const char*>(message) +
                                                   " at offset " + std::to_string(error_offset));
    }
    // JIT is an optimisation only: if it is unavailable, the interpreter gives the same matches.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    holder->stages.push_back(code);
    patterns.emplace_back(pattern);
  }
  return PreTokenizer(std::move(patterns), std::move(holder));
}

namespace {

// One stage: appends to `pieces` the consecutive pieces of `text` (matches and the text between).
void SplitStage(const pcre2_code* code, pcre2_match_data* match, std::string_view text,
                std::vector<std::string_view>& pieces) {
  if (text.empty()) return;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;  // first byte not yet assigned to a piece
  size_t offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), offset, 0, match, nullptr);
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
}

}  // namespace

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const pcre2_code* code : code_->stages) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
    next.clear();
    for (std::string_view piece : pieces) SplitStage(code, match, piece, next);
    pcre2_match_data_free(match);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace kvserve
