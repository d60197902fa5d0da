#include "grammar/regex_gbnf.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "tokenizer/utf8.h"

namespace kvserve {
namespace {

// What a JSON string may hold unescaped: everything but ", \ and control characters.
constexpr std::string_view kStringChar = "[^\"\\\\\\x00-\\x1F]";

// A character inside a GBNF class, or "" for those a JSON string cannot hold unescaped (", \ and
// control characters), which classes leave out.
std::string ClassChar(uint32_t cp) {
  if (cp < 0x20 || cp == '"' || cp == '\\') return "";
  if (cp == ']' || cp == '-' || cp == '^') return "\\" + std::string(1, static_cast<char>(cp));
  std::string out;
  AppendUtf8(static_cast<char32_t>(cp), out);
  return out;
}

// One character outside a class, as the JSON text writes it (", \ and control characters
// escaped).
std::string JsonChar(uint32_t cp) {
  if (cp == '"') return "\"\\\\\\\"\"";
  if (cp == '\\') return "\"\\\\\\\\\"";
  if (cp == '\n') return "\"\\\\n\"";
  if (cp == '\r') return "\"\\\\r\"";
  if (cp == '\t') return "\"\\\\t\"";
  if (cp < 0x20) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\"\\\\u%04X\"", cp);
    return buf;
  }
  return "[" + ClassChar(cp) + "]";
}

// A parsed piece of the pattern, written as GBNF as it is parsed; `nullable`: it can match "".
struct Piece {
  std::string gbnf;
  bool nullable = false;
};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const GrammarLimits& limits)
      : pattern_(pattern), limits_(limits) {}

  Result<std::string> Convert() {
    size_t end = pattern_.size();
    const bool anchored_start = !pattern_.empty() && pattern_[0] == '^';
    if (anchored_start) pos_ = 1;
    const bool anchored_end =
        end > pos_ && pattern_[end - 1] == '$' && (end < 2 || pattern_[end - 2] != '\\');
    if (anchored_end) --end;
    pattern_ = pattern_.substr(0, end);
    auto body = ParseAlternation(0);
    if (!body.ok()) return body.status();
    if (pos_ != pattern_.size()) return Error("unexpected ')'");
    std::string out;
    if (!anchored_start) out += std::string(kStringChar) + "* ";
    out += "(" + body->gbnf + ")";
    if (!anchored_end) out += " " + std::string(kStringChar) + "*";
    return out;
  }

 private:
  Status Error(std::string_view what) const {
    return Status::InvalidArgument("pattern '" + std::string(pattern_) + "': " + std::string(what) +
                                   " (at offset " + std::to_string(pos_) + ")");
  }
  bool AtEnd() const { return pos_ >= pattern_.size(); }
  char Peek() const { return AtEnd() ? '\0' : pattern_[pos_]; }

  Result<Piece> ParseAlternation(int depth) {
    if (depth > limits_.max_nesting) return Error("groups nested too deep (limit max_nesting)");
    Piece out;
    bool first = true;
    for (;;) {
      auto seq = ParseSequence(depth);
      if (!seq.ok()) return seq.status();
      out.gbnf += (first ? "" : " | ") + (seq->gbnf.empty() ? std::string("\"\"") : seq->gbnf);
      out.nullable = out.nullable || seq->nullable;
      first = false;
      if (Peek() != '|') return out;
      ++pos_;
    }
  }

  Result<Piece> ParseSequence(int depth) {
    Piece out{.gbnf = "", .nullable = true};
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      auto atom = ParseAtom(depth);
      if (!atom.ok()) return atom.status();
      auto repeated = ParseQuantifier(std::move(*atom));
      if (!repeated.ok()) return repeated.status();
      if (!out.gbnf.empty()) out.gbnf += " ";
      out.gbnf += repeated->gbnf;
      out.nullable = out.nullable && repeated->nullable;
    }
    return out;
  }

  Result<Piece> ParseQuantifier(Piece atom) {
    std::string suffix;
    bool nullable = atom.nullable;
    bool repeats = false;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      suffix = std::string(1, c);
      nullable = nullable || c != '+';
      repeats = c != '?';
    } else if (c == '{' && pos_ + 1 < pattern_.size() && std::isdigit(pattern_[pos_ + 1])) {
      const size_t close = pattern_.find('}', pos_);
      if (close == std::string_view::npos) return Error("unterminated {m,n}");
      suffix = std::string(pattern_.substr(pos_, close - pos_ + 1));
      for (char d : suffix.substr(1, suffix.size() - 2)) {
        if (!std::isdigit(static_cast<unsigned char>(d)) && d != ',') return Error("bad {m,n}");
      }
      nullable = nullable || suffix[1] == '0';
      repeats = suffix != "{0}" && suffix != "{1}" && suffix != "{0,1}";
      pos_ = close + 1;
    } else {
      return atom;
    }
    if (Peek() == '?') ++pos_;  // lazy: the same strings
    if (repeats && atom.nullable) {
      return Error("a repeated part can match the empty string, so the repetition never ends");
    }
    return Piece{.gbnf = "(" + atom.gbnf + ")" + suffix, .nullable = nullable};
  }

  Result<Piece> ParseAtom(int depth) {
    const char c = pattern_[pos_];
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        if (pattern_.substr(pos_, 2) != "?:") return Error("lookaround and named groups");
        pos_ += 2;
      }
      auto inner = ParseAlternation(depth + 1);
      if (!inner.ok()) return inner.status();
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      return Piece{.gbnf = "(" + inner->gbnf + ")", .nullable = inner->nullable};
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Piece{.gbnf = "[^\"\\\\\\x00-\\x1F\\u2028\\u2029]", .nullable = false};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("a repetition of nothing");
    if (c == '^' || c == '$') return Error("'^' or '$' inside the pattern");
    if (c == '\\') {
      auto escaped = ParseEscape(/*in_class=*/false);
      if (!escaped.ok()) return escaped.status();
      return Piece{.gbnf = *escaped, .nullable = false};
    }
    char32_t cp = 0;
    const size_t n = DecodeUtf8(pattern_.substr(pos_), &cp);
    if (n == 0) return Error("invalid UTF-8");
    pos_ += n;
    return Piece{.gbnf = JsonChar(static_cast<uint32_t>(cp)), .nullable = false};
  }

  // After a backslash: a class body for \d \w \s (in a class) or a whole element (outside).
  Result<std::string> ParseEscape(bool in_class) {
    ++pos_;
    if (AtEnd()) return Error("a pattern ending in '\\'");
    const char e = pattern_[pos_++];
    // Outside a class: one element; inside: a class body ("" when JSON needs an escape).
    auto one = [&](uint32_t cp) { return in_class ? ClassChar(cp) : JsonChar(cp); };
    switch (e) {
      case 'd':
        return std::string(in_class ? "0-9" : "[0-9]");
      case 'w':
        return std::string(in_class ? "a-zA-Z0-9_" : "[a-zA-Z0-9_]");
      case 's':
        return std::string(in_class ? " " : "(\" \" | \"\\\\t\" | \"\\\\n\" | \"\\\\r\")");
      case 'D':
      case 'W':
      case 'S':
        if (in_class) return Error("\\D, \\W or \\S inside a class");
        return std::string(e == 'D'   ? "[^0-9\"\\\\\\x00-\\x1F]"
                           : e == 'W' ? "[^a-zA-Z0-9_\"\\\\\\x00-\\x1F]"
                                      : "[^ \"\\\\\\x00-\\x1F]");
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one(0x0C);
      case 'v':
        return one(0x0B);
      case 'u': {
        if (pos_ + 4 > pattern_.size()) return Error("\\u needs 4 hex digits");
        const std::string hex(pattern_.substr(pos_, 4));
        pos_ += 4;
        char* endp = nullptr;
        const unsigned long cp = std::strtoul(hex.c_str(), &endp, 16);
        if (endp != hex.c_str() + 4) return Error("\\u needs 4 hex digits");
        return one(static_cast<uint32_t>(cp));
      }
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) return Error("backreferences");
        if (e == 'b' || e == 'B') return Error("word boundaries");
        if (std::isalnum(static_cast<unsigned char>(e))) {
          return Error(std::string("unknown escape '\\") + e + "'");
        }
        return one(static_cast<uint8_t>(e));
    }
  }

  Result<Piece> ParseClass() {
    ++pos_;  // [
    std::string body;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    while (Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      if (Peek() == '\\') {
        auto escaped = ParseEscape(/*in_class=*/true);
        if (!escaped.ok()) return escaped.status();
        body += *escaped;
        continue;
      }
      char32_t cp = 0;
      const size_t n = DecodeUtf8(pattern_.substr(pos_), &cp);
      if (n == 0) return Error("invalid UTF-8");
      pos_ += n;
      if (cp == '-' && !body.empty() && Peek() != ']') {
        body += "-";
      } else {
        body += ClassChar(static_cast<uint32_t>(cp));
      }
    }
    ++pos_;
    if (negated) return Piece{.gbnf = "[^" + body + "\"\\\\\\x00-\\x1F]", .nullable = false};
    return Piece{.gbnf = "[" + body + "]", .nullable = false};
  }

  std::string_view pattern_;
  GrammarLimits limits_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> RegexToGbnf(std::string_view pattern, const GrammarLimits& limits) {
  if (pattern.size() > limits.max_source_bytes) {
    return Status::InvalidArgument("pattern: " + std::to_string(pattern.size()) +
                                   " bytes exceed the limit (limit max_source_bytes)");
  }
  return RegexParser(pattern, limits).Convert();
}

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace kvserve
