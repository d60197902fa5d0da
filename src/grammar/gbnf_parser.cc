#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <optional>

#include "grammar/grammar_builder.h"
#include "tokenizer/utf8.h"

namespace kvserve {
namespace {

using Kind = GrammarElement::Kind;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// Sorted, merged ranges.
std::vector<std::pair<uint32_t, uint32_t>> Normalized(
    std::vector<std::pair<uint32_t, uint32_t>> r) {
  std::sort(r.begin(), r.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& range : r) {
    if (!out.empty() && range.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, range.second);
    } else {
      out.push_back(range);
    }
  }
  return out;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits)
      : text_(text), limits_(limits), builder_(limits) {}

  Result<std::shared_ptr<const Grammar>> Parse() && {
    if (text_.size() > limits_.max_source_bytes) {
      return Status::InvalidArgument(
          "grammar: " + std::to_string(text_.size()) + " bytes exceed the limit of " +
          std::to_string(limits_.max_source_bytes) + " (limit max_source_bytes)");
    }
    SkipSpace(true);
    while (pos_ < text_.size()) {
      KVSERVE_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    return std::move(builder_).Finish("root");
  }

 private:
  Status Error(std::string_view what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return Status::InvalidArgument("grammar: line " + std::to_string(line) + " column " +
                                   std::to_string(column) + ": " + std::string(what));
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  Status ParseRule() {
    const std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=")
      return Error("expected '::=' after '" + std::string(name) + "'");
    pos_ += 3;
    SkipSpace(true);
    const uint32_t id = builder_.RuleId(name);
    auto alternatives = ParseAlternatives(name, 0);
    if (!alternatives.ok()) return alternatives.status();
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') return Error("expected the end of the line");
    return builder_.Define(id, std::move(*alternatives));
  }

  Result<std::vector<GrammarSequence>> ParseAlternatives(std::string_view rule, int depth) {
    if (depth > limits_.max_nesting) {
      return Error("parentheses nested deeper than " + std::to_string(limits_.max_nesting) +
                   " (limit max_nesting)");
    }
    std::vector<GrammarSequence> alternatives;
    for (;;) {
      auto sequence = ParseSequence(rule, depth);
      if (!sequence.ok()) return sequence.status();
      alternatives.push_back(std::move(*sequence));
      if (Peek() != '|') return alternatives;
      ++pos_;
      SkipSpace(true);
    }
  }

  Result<GrammarSequence> ParseSequence(std::string_view rule, int depth) {
    GrammarSequence out;
    GrammarSequence last;  // the unit a repetition applies to
    for (;;) {
      const char c = Peek();
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last.empty()) return Error(std::string("'") + c + "' follows nothing");
        auto repeat = ParseRepeat();
        if (!repeat.ok()) return repeat.status();
        out.resize(out.size() - last.size());
        KVSERVE_RETURN_IF_ERROR(
            builder_.AppendRepeat(rule, last, repeat->first, repeat->second, out));
        last.clear();
      } else if (c == '"' || c == '[' || c == '.' || c == '(' || IsNameChar(c)) {
        auto unit = ParseUnit(rule, depth);
        if (!unit.ok()) return unit.status();
        last = std::move(*unit);
        out.insert(out.end(), last.begin(), last.end());
      } else {
        return out;
      }
      SkipSpace(depth > 0);
    }
  }

  // One element (a literal may give several, which repeat together).
  Result<GrammarSequence> ParseUnit(std::string_view rule, int depth) {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') {
      auto set = ParseClass();
      if (!set.ok()) return set.status();
      return GrammarSequence{builder_.Chars(std::move(*set))};
    }
    if (c == '.') {
      ++pos_;
      return GrammarSequence{builder_.Chars(CharSet{.ranges = {}, .negated = true})};
    }
    if (c == '(') {
      ++pos_;
      SkipSpace(true);
      auto inner = ParseAlternatives(rule, depth + 1);
      if (!inner.ok()) return inner.status();
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      if (inner->size() == 1) return std::move((*inner)[0]);
      auto id = builder_.AddGenerated(rule, std::move(*inner));
      if (!id.ok()) return id.status();
      return GrammarSequence{GrammarElement{.kind = Kind::kRule, .index = *id}};
    }
    const std::string_view name = ParseName();
    return GrammarSequence{GrammarElement{.kind = Kind::kRule, .index = builder_.RuleId(name)}};
  }

  // {m}, {m,}, {m,n}, *, +, ?: (min, max or nullopt for unbounded).
  Result<std::pair<int, std::optional<int>>> ParseRepeat() {
    const char c = text_[pos_++];
    if (c == '*') return std::make_pair(0, std::optional<int>());
    if (c == '+') return std::make_pair(1, std::optional<int>());
    if (c == '?') return std::make_pair(0, std::optional<int>(1));
    SkipSpace(false);
    auto min = ParseCount();
    if (!min) return Error("expected a number after '{'");
    std::optional<int> max = *min;
    SkipSpace(false);
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      max = ParseCount();
    }
    SkipSpace(false);
    if (Peek() != '}') return Error("expected '}'");
    ++pos_;
    if (max && *max < *min) return Error("repetition {m,n} with n < m");
    return std::make_pair(*min, max);
  }

  std::optional<int> ParseCount() {
    const size_t start = pos_;
    int64_t value = 0;
    while (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = std::min<int64_t>(value * 10 + (text_[pos_] - '0'), 1 << 30);
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int>(value);
  }

  // One character of a literal or class, escapes decoded.
  Result<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of the grammar");
    if (text_[pos_] != '\\') {
      char32_t cp = 0;
      const size_t n = DecodeUtf8(text_.substr(pos_), &cp);
      if (n == 0) return Error("invalid UTF-8");
      pos_ += n;
      return static_cast<uint32_t>(cp);
    }
    ++pos_;
    if (AtEnd()) return Error("unexpected end after '\\'");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
      case '"':
      case ']':
      case '[':
      case '-':
      case '^':
        return uint32_t(e);
      case 'x':
        return ParseHex(2);
      case 'u':
        return ParseHex(4);
      case 'U':
        return ParseHex(8);
      default:
        return Error(std::string("unknown escape '\\") + e + "'");
    }
  }

  Result<uint32_t> ParseHex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return Error("expected " + std::to_string(digits) + " hex digits");
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) return Error("code point beyond U+10FFFF");
    return value;
  }

  Result<GrammarSequence> ParseLiteral() {
    ++pos_;  // opening quote
    GrammarSequence out;
    while (Peek() != '"') {
      if (AtEnd() || Peek() == '\n') return Error("unterminated string literal");
      auto cp = ParseChar();
      if (!cp.ok()) return cp.status();
      out.push_back(builder_.Chars(CharSet{.ranges = {{*cp, *cp}}, .negated = false}));
    }
    ++pos_;
    return out;
  }

  Result<CharSet> ParseClass() {
    ++pos_;  // [
    CharSet set;
    if (Peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      auto first = ParseChar();
      if (!first.ok()) return first.status();
      uint32_t last = *first;
      if (Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        auto upper = ParseChar();
        if (!upper.ok()) return upper.status();
        if (*upper < *first) return Error("character range out of order");
        last = *upper;
      }
      ranges.emplace_back(*first, last);
    }
    ++pos_;
    set.ranges = Normalized(std::move(ranges));
    return set;
  }

  std::string_view text_;
  GrammarLimits limits_;
  GrammarBuilder builder_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits) {
  return GbnfParser(text, limits).Parse();
}

}  // namespace kvserve
