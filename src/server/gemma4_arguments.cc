#include "server/gemma4_arguments.h"

#include <nlohmann/json.hpp>

#include "tokenizer/jinja_json.h"
#include "tokenizer/utf8.h"

namespace kvserve {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kWhitespace = " \t\n\r";

// A recursive-descent reader over the text; every method leaves `pos_` after what it read.
class ValueReader {
 public:
  explicit ValueReader(std::string_view text) : text_(text) {}

  std::optional<Json> Mapping() {
    if (!Take("{") || ++depth_ > kMaxJinjaJsonDepth) return std::nullopt;
    Json object = Json::object();
    SkipSpace();
    if (Take("}")) return --depth_, object;
    while (true) {
      auto key = Key();
      if (!key || !Take(":")) return std::nullopt;
      auto value = Value();
      if (!value) return std::nullopt;
      object[*key] = std::move(*value);
      SkipSpace();
      if (Take("}")) return --depth_, object;
      if (!Take(",")) return std::nullopt;
      SkipSpace();
    }
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  void SkipSpace() {
    const size_t next = text_.find_first_not_of(kWhitespace, pos_);
    pos_ = next == std::string_view::npos ? text_.size() : next;
  }

  bool Take(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }

  std::optional<std::string> Quoted() {
    if (!Take(kQuote)) return std::nullopt;
    const size_t end = text_.find(kQuote, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    // Invalid UTF-8 is replaced here, so that keys that differ only there are one key.
    std::string text = SanitizeUtf8(text_.substr(pos_, end - pos_));
    pos_ = end + kQuote.size();
    return text;
  }

  // A bare key runs to the ':' (llama.cpp's [^:}]+), trimmed.
  std::optional<std::string> Key() {
    if (text_.substr(pos_, kQuote.size()) == kQuote) {
      auto key = Quoted();
      SkipSpace();
      return key;
    }
    const size_t end = text_.find_first_of(":}", pos_);
    if (end == std::string_view::npos || text_[end] != ':') return std::nullopt;
    std::string_view key = text_.substr(pos_, end - pos_);
    key = key.substr(0, key.find_last_not_of(kWhitespace) + 1);
    if (key.empty()) return std::nullopt;
    pos_ = end;
    return SanitizeUtf8(key);
  }

  std::optional<Json> List() {
    if (!Take("[") || ++depth_ > kMaxJinjaJsonDepth) return std::nullopt;
    Json list = Json::array();
    SkipSpace();
    if (Take("]")) return --depth_, list;
    while (true) {
      auto value = Value();
      if (!value) return std::nullopt;
      list.push_back(std::move(*value));
      SkipSpace();
      if (Take("]")) return --depth_, list;
      if (!Take(",")) return std::nullopt;
    }
  }

  // A number (JSON's syntax), true, false, null or None.
  std::optional<Json> Scalar() {
    for (const auto& [word, value] : {std::pair<std::string_view, Json>{"true", true},
                                      {"false", false},
                                      {"null", nullptr},
                                      {"None", nullptr}}) {
      if (Take(word)) return value;
    }
    const size_t end = text_.find_first_not_of("+-.0123456789eE", pos_);
    const std::string_view number =
        text_.substr(pos_, (end == std::string_view::npos ? text_.size() : end) - pos_);
    if (number.empty()) return std::nullopt;
    Json value = Json::parse(number, nullptr, /*allow_exceptions=*/false);
    if (!value.is_number()) return std::nullopt;
    pos_ += number.size();
    return value;
  }

  std::optional<Json> Value() {
    SkipSpace();
    if (text_.substr(pos_, kQuote.size()) == kQuote) {
      auto text = Quoted();
      if (!text) return std::nullopt;
      return Json(std::move(*text));
    }
    if (pos_ < text_.size() && text_[pos_] == '{') return Mapping();
    if (pos_ < text_.size() && text_[pos_] == '[') return List();
    return Scalar();
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::optional<std::string> Gemma4ArgumentsJson(std::string_view text) {
  const size_t start = text.find_first_not_of(kWhitespace);
  if (start == std::string_view::npos) return std::nullopt;
  ValueReader trimmed(text.substr(start));
  auto mapping = trimmed.Mapping();
  if (!mapping || !trimmed.AtEnd()) return std::nullopt;
  return mapping->dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kvserve
