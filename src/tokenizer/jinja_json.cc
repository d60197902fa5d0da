#include "tokenizer/jinja_json.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace kvserve {

namespace {

using OrderedJson = nlohmann::ordered_json;

void AppendQuoted(std::string_view text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;  // ensure_ascii=False: UTF-8 is written as it is
        }
    }
  }
  out += '"';
}

void Newline(int indent, int depth, std::string& out) {
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

void Dump(const OrderedJson& value, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  const char* separator = pretty ? "," : ", ";
  if (value.is_object()) {
    if (value.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += separator;
      first = false;
      if (pretty) Newline(indent, depth + 1, out);
      AppendQuoted(key, out);
      out += ": ";
      Dump(item, indent, depth + 1, out);
    }
    if (pretty) Newline(indent, depth, out);
    out += '}';
  } else if (value.is_array()) {
    if (value.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += separator;
      if (pretty) Newline(indent, depth + 1, out);
      Dump(value[i], indent, depth + 1, out);
    }
    if (pretty) Newline(indent, depth, out);
    out += ']';
  } else if (value.is_string()) {
    AppendQuoted(value.get_ref<const std::string&>(), out);
  } else if (value.is_boolean()) {
    out += value.get<bool>() ? "true" : "false";
  } else if (value.is_null()) {
    out += "null";
  } else {
    out += value.dump();  // numbers: shortest round-trip form, as Python's repr
  }
}

}  // namespace

int JsonNestingDepth(std::string_view json_text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::optional<std::string> JinjaToJson(std::string_view json_text, int indent) {
  if (JsonNestingDepth(json_text) > kMaxJinjaJsonDepth) return std::nullopt;
  OrderedJson value = OrderedJson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  std::string out;
  Dump(value, indent, 0, out);
  return out;
}

std::string JinjaQuote(std::string_view text) {
  std::string out;
  AppendQuoted(text, out);
  return out;
}

}  // namespace kvserve
