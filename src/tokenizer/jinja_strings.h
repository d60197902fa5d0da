// Python's string methods as Jinja chat templates use them (trim, rstrip, lstrip('\n'), replace,
// startswith, `in`), over ASCII whitespace: what the chat template renderers (chat_template.cc,
// chat_template_qwen_xml.cc) apply to message text to match the templates byte for byte.
#pragma once

#include <string>
#include <string_view>

namespace kvserve::jinja {

inline constexpr std::string_view kWhitespace = " \t\n\r\v\f";

// Python's str.strip() / rstrip() over ASCII whitespace, as Jinja's trim filter does.
inline std::string_view Strip(std::string_view s) {
  const size_t first = s.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kWhitespace) - first + 1);
}

inline std::string_view RStrip(std::string_view s) {
  const size_t last = s.find_last_not_of(kWhitespace);
  return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}

inline std::string_view LStripNewlines(std::string_view s) {
  const size_t first = s.find_first_not_of('\n');
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

inline std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

inline bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace kvserve::jinja
