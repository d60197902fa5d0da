#include "tokenizer/normalizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <functional>

namespace kvserve {

struct Normalizer::Compiled {
  pcre2_code* regex = nullptr;
  ~Compiled() { pcre2_code_free(regex); }
};

namespace {

constexpr std::string_view kStageNames[] = {"nfc",           "nfd",           "nfkc",  "nfkd",
                                            "lowercase",     "strip_accents", "strip", "replace",
                                            "replace_regex", "prepend"};

// Calls `rewrite` on each maximal run of valid UTF-8 in `text` and appends its result; invalid
// bytes are appended unchanged.
std::string RewriteValidRuns(std::string_view text,
                             const std::function<std::string(std::string_view)>& rewrite) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  int32_t run = 0;
  int32_t i = 0;
  while (i < n) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c >= 0) continue;
    if (start > run) out += rewrite(text.substr(run, start - run));
    out.append(text.substr(start, i - start));
    run = i;
  }
  if (n > run) out += rewrite(text.substr(run));
  return out;
}

// Code points of valid UTF-8 `text` kept by `keep`.
std::string FilterCodePoints(std::string_view text, const std::function<bool(UChar32)>& keep) {
  std::string out;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < n;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (keep(c)) out.append(text.substr(start, i - start));
  }
  return out;
}

std::string Normalize(const icu::Normalizer2* form, std::string_view text) {
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode error = U_ZERO_ERROR;
  form->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                      nullptr, error);
  return U_SUCCESS(error) ? out : std::string(text);
}

std::string Lowercase(std::string_view text) {
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode error = U_ZERO_ERROR;
  icu::CaseMap::utf8ToLower("", 0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())),
                            sink, nullptr, error);
  return U_SUCCESS(error) ? out : std::string(text);
}

bool IsWhiteSpace(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE) != 0; }

// `text` without White_Space at the chosen ends (an invalid byte stops the trim).
std::string Strip(std::string_view text, bool left, bool right) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  int32_t begin = 0;
  int32_t end = n;
  while (left && begin < end) {
    int32_t i = begin;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (!IsWhiteSpace(c)) break;
    begin = i;
  }
  while (right && end > begin) {
    int32_t i = end;
    UChar32 c;
    U8_PREV(s, begin, i, c);
    if (!IsWhiteSpace(c)) break;
    end = i;
  }
  return std::string(text.substr(begin, end - begin));
}

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t begin = 0;
  for (size_t hit = text.find(from); hit != std::string_view::npos; hit = text.find(from, begin)) {
    out.append(text.substr(begin, hit - begin));
    out.append(to);
    begin = hit + from.size();
  }
  out.append(text.substr(begin));
  return out;
}

std::string ReplaceRegex(const pcre2_code* regex, std::string_view text, std::string_view to) {
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex, nullptr);
  const uint32_t options = PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL |
                           PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_NO_UTF_CHECK;
  std::string out(text.size() + 16, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    PCRE2_SIZE length = out.size();
    const int rc =
        pcre2_substitute(regex, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, options,
                         match, nullptr, reinterpret_cast<PCRE2_SPTR>(to.data()), to.size(),
                         reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
    if (rc >= 0) {
      out.resize(length);
      pcre2_match_data_free(match);
      return out;
    }
    if (rc != PCRE2_ERROR_NOMEMORY) break;
    out.assign(length, '\0');
  }
  pcre2_match_data_free(match);
  return std::string(text);
}

}  // namespace

Normalizer::Normalizer() = default;
Normalizer::~Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;

Result<Normalizer> Normalizer::FromTriples(std::span<const std::string> triples) {
  const std::string key = "tokenizer.kvserve.normalizer";
  if (triples.size() % 3 != 0) {
    return Result<Normalizer>::InvalidArgument(key + ": " + std::to_string(triples.size()) +
                                               " strings, not (stage, a, b) triples");
  }
  Normalizer normalizer;
  for (size_t i = 0; i < triples.size(); i += 3) {
    Stage stage{triples[i], triples[i + 1], triples[i + 2]};
    bool known = false;
    for (std::string_view name : kStageNames) known = known || stage.name == name;
    if (!known) {
      return Result<Normalizer>::InvalidArgument(key + "[" + std::to_string(i / 3) +
                                                 "]: unknown stage '" + stage.name + "'");
    }
    auto compiled = std::make_unique<Compiled>();
    if (stage.name == "replace_regex") {
      int code = 0;
      PCRE2_SIZE offset = 0;
      compiled->regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(stage.a.data()), stage.a.size(),
                                      PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
      if (compiled->regex == nullptr) {
        return Result<Normalizer>::InvalidArgument(
            key + "[" + std::to_string(i / 3) + "]: pattern '" + stage.a +
            "' does not compile at offset " + std::to_string(offset));
      }
    }
    normalizer.stages_.push_back(std::move(stage));
    normalizer.compiled_.push_back(std::move(compiled));
  }
  return normalizer;
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string current(text);
  for (size_t i = 0; i < stages_.size(); ++i) {
    const Stage& stage = stages_[i];
    const std::string& name = stage.name;
    if (name == "prepend") {
      if (!current.empty()) current = stage.a + current;
      continue;
    }
    if (name == "strip") {
      current = Strip(current, stage.a == "1", stage.b == "1");
      continue;
    }
    if (name == "replace") {
      current = ReplaceAll(current, stage.a, stage.b);
      continue;
    }
    UErrorCode error = U_ZERO_ERROR;
    const icu::Normalizer2* form = name == "nfc"    ? icu::Normalizer2::getNFCInstance(error)
                                   : name == "nfd"  ? icu::Normalizer2::getNFDInstance(error)
                                   : name == "nfkc" ? icu::Normalizer2::getNFKCInstance(error)
                                   : name == "nfkd" ? icu::Normalizer2::getNFKDInstance(error)
                                                    : nullptr;
    const pcre2_code* regex = compiled_[i]->regex;
    current = RewriteValidRuns(current, [&](std::string_view run) -> std::string {
      if (form != nullptr) return Normalize(form, run);
      if (name == "lowercase") return Lowercase(run);
      if (name == "strip_accents") {
        return FilterCodePoints(run,
                                [](UChar32 c) { return (U_GET_GC_MASK(c) & U_GC_M_MASK) == 0; });
      }
      return ReplaceRegex(regex, run, stage.b);
    });
  }
  return current;
}

}  // namespace kvserve
