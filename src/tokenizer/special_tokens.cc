#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>

namespace kvserve {

namespace {

// Phi-3's special tokens that keep the whitespace after them (llama.cpp's list).
constexpr std::string_view kPhi3KeepsWhitespace[] = {"<unk>", "<s>", "<|endoftext|>"};

template <size_t N>
bool IsOneOf(std::string_view text, const std::string_view (&texts)[N]) {
  return std::find(std::begin(texts), std::end(texts), text) != std::end(texts);
}

bool IsPhi3(std::string_view model_name) {
  std::string lower(model_name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos;
}

// isspace() in the C locale, what llama.cpp strips: space, \t, \n, \v, \f, \r.
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

constexpr std::span<const TextRange> kNoRanges;

// Whether bytes [begin, begin + length) share a byte with one of `ranges` (sorted by begin).
bool Overlaps(std::span<const TextRange> ranges, size_t begin, size_t length) {
  const auto after =
      std::upper_bound(ranges.begin(), ranges.end(), begin + length,
                       [](size_t end, const TextRange& range) { return end <= range.begin; });
  if (after == ranges.begin()) return false;
  const TextRange& last = *(after - 1);  // the last range that starts before our end
  return last.begin + last.length > begin;
}

}  // namespace

SpecialTokens SpecialTokens::FromVocab(const Vocab& vocab, std::string_view model_name) {
  const bool phi3 = IsPhi3(model_name);
  SpecialTokens out;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenData& token = vocab.token(id);
    if (token.text.empty()) continue;
    const bool control = vocab.CountsAsControl(id);
    const bool unknown = token.type == TokenType::kUnknown;
    if (!control && !unknown && token.type != TokenType::kUserDefined) continue;
    out.entries_.push_back(Entry{.id = id,
                                 .text = token.text,
                                 .needs_parse_special = control || unknown,
                                 .rstrip = phi3 && !IsOneOf(token.text, kPhi3KeepsWhitespace)});
  }
  std::stable_sort(out.entries_.begin(), out.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  return out;
}

bool SpecialTokens::Cut(const Entry& entry, std::string_view text, const Fragment& fragment,
                        std::span<const TextRange> plain, std::vector<Fragment>& out) {
  const size_t end = fragment.begin + fragment.length;
  const std::string_view searched = text.substr(0, end);  // finds stay inside the fragment
  size_t begin = fragment.begin;
  size_t from = begin;  // where the next search starts (past skipped occurrences)
  bool found = false;
  for (size_t hit = searched.find(entry.text, from); hit != std::string_view::npos;
       hit = searched.find(entry.text, from)) {
    if (Overlaps(plain, hit, entry.text.size())) {
      from = hit + 1;
      continue;
    }
    found = true;
    if (hit > begin) out.push_back(Fragment{kNoToken, begin, hit - begin});
    out.push_back(Fragment{entry.id, 0, 0});
    begin = hit + entry.text.size();
    if (entry.rstrip) {
      while (begin < end && IsAsciiSpace(text[begin])) ++begin;
    }
    from = begin;
  }
  if (begin < end) out.push_back(Fragment{kNoToken, begin, end - begin});
  return found;
}

std::vector<SpecialTokens::Fragment> SpecialTokens::Split(std::string_view text, bool parse_special,
                                                          std::span<const TextRange> plain) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back(Fragment{kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const Entry& entry : entries_) {
    if (entry.needs_parse_special && !parse_special) continue;
    next.clear();
    bool found = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
      } else {
        found |= Cut(entry, text, fragment, entry.needs_parse_special ? plain : kNoRanges, next);
      }
    }
    if (found) fragments.swap(next);
  }
  return fragments;
}

}  // namespace kvserve
