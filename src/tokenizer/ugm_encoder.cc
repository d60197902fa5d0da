#include "tokenizer/ugm_encoder.h"

#include <algorithm>
#include <cfloat>
#include <limits>

#include "tokenizer/utf8.h"

namespace kvserve {

namespace {

constexpr std::string_view kCharsmapKey = "tokenizer.ggml.precompiled_charsmap";
constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // ▁ U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr float kUnknownPenalty = 10.0f;                   // llama.cpp's, below the lowest score

// The bytes of the UTF-8 character that starts `text` as llama.cpp reads it
// (unicode_cpt_from_utf8: lead byte and continuation bytes checked, overlong forms, surrogates
// and leads F5..F7 accepted), or 0 when it reads none there.
size_t CharLength(std::string_view text) { return DecodeUtf8AsLlamaCpp(text, 0); }

// The length a lead byte announces (1 for ASCII and stray continuation bytes), as the split walks
// the normalized text (llama.cpp's unicode_len_utf8).
size_t AnnouncedLength(char lead) {
  static constexpr size_t kByHighBits[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighBits[static_cast<uint8_t>(lead) >> 4];
}

}  // namespace

Result<UgmEncoder> UgmEncoder::Create(const GgufFile& file, const Vocab& vocab) {
  CharsmapNormalizer charsmap;
  if (const GgufValue* value = file.Find(kCharsmapKey)) {
    if (value->type != GgufValueType::kArray ||
        (value->array_type != GgufValueType::kUint8 && value->array_type != GgufValueType::kInt8)) {
      return Result<UgmEncoder>::InvalidArgument(
          std::string(kCharsmapKey) + ": expected an array of uint8 or int8, found type " +
          std::to_string(static_cast<uint32_t>(value->type)) + " (array type " +
          std::to_string(static_cast<uint32_t>(value->array_type)) + ")");
    }
    auto parsed = CharsmapNormalizer::FromBlob(
        std::span<const uint8_t>(value->array_data, static_cast<size_t>(value->array_size)));
    if (!parsed.ok()) return parsed.status();
    charsmap = std::move(*parsed);
  }
  return UgmEncoder(vocab, std::move(charsmap));
}

UgmEncoder::UgmEncoder(const Vocab& vocab, CharsmapNormalizer charsmap)
    : vocab_(&vocab), charsmap_(std::move(charsmap)) {
  float min_score = FLT_MAX;
  std::vector<std::pair<std::string_view, int32_t>> matched, user_defined;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenData& token = vocab.token(id);
    if (token.type == TokenType::kNormal) min_score = std::min(min_score, token.score);
    if (token.type == TokenType::kNormal || token.type == TokenType::kUserDefined ||
        token.type == TokenType::kUnused) {
      matched.emplace_back(token.text, id);
    }
    if (token.type == TokenType::kUserDefined) user_defined.emplace_back(token.text, id);
  }
  tokens_ = ByteTrie(matched);
  user_defined_ = ByteTrie(user_defined);
  unknown_score_ = min_score - kUnknownPenalty;  // in float, as llama.cpp computes it
}

size_t UgmEncoder::NormalizePrefix(std::string_view text, size_t offset,
                                   std::string_view* piece) const {
  const std::string_view rest = text.substr(offset);
  const size_t user_defined = user_defined_.WalkLength(rest);
  if (user_defined > 0) {
    *piece = rest.substr(0, user_defined);
    return user_defined;
  }
  const size_t matched = charsmap_.Match(rest, piece);
  if (matched > 0) return matched;
  const size_t length = CharLength(rest);
  if (length == 0) {
    *piece = kReplacement;
    return 1;
  }
  *piece = rest.substr(0, length);
  return length;
}

std::string UgmEncoder::Normalize(std::string_view text) const {
  const bool merge_spaces = vocab_->remove_extra_whitespaces();
  const bool prepend_space = vocab_->add_space_prefix();
  std::string out;
  out.reserve(text.size() * 3);
  bool space_prepended = false;
  bool in_word = false;  // the last byte written was not a space
  for (size_t offset = 0; offset < text.size();) {
    std::string_view piece;
    offset += NormalizePrefix(text, offset, &piece);
    for (char c : piece) {
      if (c == ' ') {
        in_word = false;
        if (!merge_spaces) out.append(kSpaceEscape);
        continue;
      }
      if (!in_word) {
        in_word = true;
        if ((prepend_space && !space_prepended) || merge_spaces) {
          out.append(kSpaceEscape);
          space_prepended = true;
        }
      }
      out.push_back(c);
    }
  }
  return out;
}

void UgmEncoder::Encode(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = Normalize(text);
  const size_t n = normalized.size();
  if (n == 0) return;
  const int32_t unk = vocab_->unk();
  struct Best {
    int32_t id;    // the last token of the best split of normalized[0, end)
    size_t start;  // where that token starts
    double score;  // the split's total
  };
  // [n + 1], indexed by end offset in bytes.
  std::vector<Best> best(n + 1, Best{unk, 0, std::numeric_limits<double>::lowest()});
  best[0].score = 0;
  for (size_t start = 0; start < n;) {
    const size_t char_length = std::min(AnnouncedLength(normalized[start]), n - start);
    const double base = best[start].score;
    bool whole_char_token = false;
    int32_t node = ByteTrie::root();
    for (size_t end = start + 1; end <= n; ++end) {
      node = tokens_.Child(node, static_cast<uint8_t>(normalized[end - 1]));
      if (node == ByteTrie::kNone) break;
      const int32_t id = tokens_.value(node);
      if (id == ByteTrie::kNone) continue;
      if (end - start == char_length) whole_char_token = true;
      const TokenData& token = vocab_->token(id);
      const double score =
          base + (token.type == TokenType::kUserDefined ? 0.0 : static_cast<double>(token.score));
      if (score > best[end].score) best[end] = Best{id, start, score};
    }
    if (!whole_char_token) {
      const double score = base + unknown_score_;
      Best& champion = best[start + char_length];
      if (score > champion.score) champion = Best{unk, start, score};
    }
    start += char_length;
  }
  // Back from the end; adjacent unknowns become one. A vocabulary without an unknown id drops the
  // characters no token covers.
  const size_t first = out.size();
  bool previous_unknown = false;
  for (size_t end = n;;) {
    const Best& step = best[end];
    const bool unknown = step.id == unk;
    if (!(previous_unknown && unknown) && step.id != kNoToken) out.push_back(step.id);
    if (step.start == 0) break;
    previous_unknown = unknown;
    end = step.start;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

}  // namespace kvserve
