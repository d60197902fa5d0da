#include "server/tool_call_parser.h"

#include "tokenizer/jinja_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

namespace kvserve {

size_t PartialMarker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kWhitespace = " \t\n\r";
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// The index just after the JSON object or array that starts at text[start] ('{' or '['), or npos
// while it is unfinished. Only brackets and strings are followed; the parser checks the rest.
size_t JsonValueEnd(std::string_view text, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// {"name": "...", "arguments" or "parameters": {...} or a string holding such an object}.
std::optional<ParsedToolCall> CallFromJson(const OrderedJson& call) {
  if (!call.is_object()) return std::nullopt;
  auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  OrderedJson object = OrderedJson::object();
  if (arguments != call.end()) {
    if (arguments->is_string() &&
        JsonNestingDepth(arguments->get_ref<const std::string&>()) > kMaxJinjaJsonDepth) {
      return std::nullopt;
    }
    object = arguments->is_string()
                 ? OrderedJson::parse(arguments->get_ref<const std::string&>(), nullptr, false)
                 : *arguments;
    if (!object.is_object()) return std::nullopt;
  }
  return ParsedToolCall{
      .name = name->get<std::string>(),
      .arguments = object.dump(-1, ' ', false, OrderedJson::error_handler_t::replace)};
}

// One call object, or an array of them (every element must be a call).
std::optional<std::vector<ParsedToolCall>> CallsFromText(std::string_view text) {
  if (JsonNestingDepth(text) > kMaxJinjaJsonDepth) return std::nullopt;  // dumping recurses
  const OrderedJson value = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<ParsedToolCall> calls;
  if (value.is_array() && !value.empty()) {
    for (const OrderedJson& item : value) {
      auto call = CallFromJson(item);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  auto call = CallFromJson(value);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

// A parameter's text as a JSON value (see the header): a string when `is_string`, else the JSON
// it spells, else a string.
OrderedJson XmlParameterValue(const std::string& text, bool is_string) {
  if (!is_string) {
    if (text == "True" || text == "False") return text == "True";
    if (text == "None") return nullptr;
    if (JsonNestingDepth(text) <= kMaxJinjaJsonDepth) {
      OrderedJson value = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!value.is_discarded()) return value;
    }
  }
  return text;
}

// The name in "<tag=NAME>" at text[pos] (pos just after '='): the text up to '>', which must be
// non-empty and hold no '<', '>' or newline. Advances pos past '>'.
std::optional<std::string> XmlTagName(std::string_view text, size_t& pos) {
  const size_t end = text.find('>', pos);
  if (end == std::string_view::npos || end == pos) return std::nullopt;
  const std::string_view name = text.substr(pos, end - pos);
  if (name.find_first_of("<\n") != std::string_view::npos) return std::nullopt;
  pos = end + 1;
  return std::string(name);
}

size_t SkipWhitespace(std::string_view text, size_t pos) {
  const size_t next = text.find_first_not_of(kWhitespace, pos);
  return next == std::string_view::npos ? text.size() : next;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolFormat format, std::span<const ChatTool> tools)
    : format_(format) {
  if (format != ToolFormat::kQwenXml) return;
  for (const ChatTool& tool : tools) {
    const OrderedJson json = OrderedJson::parse(tool.json, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) continue;
    const OrderedJson function = json.value("function", OrderedJson());
    const OrderedJson parameters =
        function.is_object() ? function.value("parameters", OrderedJson()) : OrderedJson();
    if (!parameters.is_object() || !parameters.contains("properties") ||
        !parameters["properties"].is_object()) {
      continue;
    }
    for (const auto& [name, schema] : parameters["properties"].items()) {
      if (QwenXmlStringParameter(schema)) string_parameters_[tool.name].insert(name);
    }
  }
}

std::optional<std::vector<ParsedToolCall>> ToolCallParser::CallsFromXml(
    std::string_view body) const {
  std::vector<ParsedToolCall> calls;
  size_t pos = SkipWhitespace(body, 0);
  while (pos < body.size()) {
    if (body.substr(pos, kFunctionOpen.size()) != kFunctionOpen) return std::nullopt;
    pos += kFunctionOpen.size();
    auto name = XmlTagName(body, pos);
    if (!name) return std::nullopt;
    auto strings = string_parameters_.find(*name);
    OrderedJson arguments = OrderedJson::object();
    for (pos = SkipWhitespace(body, pos); body.substr(pos, kFunctionClose.size()) != kFunctionClose;
         pos = SkipWhitespace(body, pos)) {
      if (body.substr(pos, kParameterOpen.size()) != kParameterOpen) return std::nullopt;
      pos += kParameterOpen.size();
      auto key = XmlTagName(body, pos);
      const size_t end = body.find(kParameterClose, pos);
      if (!key || end == std::string_view::npos) return std::nullopt;
      std::string_view value = body.substr(pos, end - pos);
      if (value.starts_with('\n')) value.remove_prefix(1);
      if (value.ends_with('\n')) value.remove_suffix(1);
      const bool is_string = strings != string_parameters_.end() && strings->second.contains(*key);
      arguments[*key] = XmlParameterValue(std::string(value), is_string);
      pos = end + kParameterClose.size();
    }
    pos = SkipWhitespace(body, pos + kFunctionClose.size());
    calls.push_back(ParsedToolCall{
        .name = std::move(*name),
        .arguments = arguments.dump(-1, ' ', false, OrderedJson::error_handler_t::replace)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

bool QwenXmlStringParameter(const OrderedJson& schema) {
  if (!schema.is_object()) return false;
  if (schema.contains("type")) {
    const OrderedJson& type = schema["type"];
    if (type.is_string()) return type == "string";
    return type.is_array() && std::find(type.begin(), type.end(), "string") != type.end();
  }
  if (schema.contains("const")) return schema["const"].is_string();
  if (!schema.contains("enum") || !schema["enum"].is_array() || schema["enum"].empty()) {
    return false;
  }
  const OrderedJson& values = schema["enum"];
  return std::all_of(values.begin(), values.end(),
                     [](const OrderedJson& v) { return v.is_string(); });
}

std::string NewToolCallId(ToolFormat format) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  const bool mistral = format == ToolFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[pick(rng)];
  return id;
}

ToolCallOutput ToolCallParser::ParseAll(ToolFormat format, std::string_view text,
                                        std::span<const ChatTool> tools) {
  ToolCallParser parser(format, tools);
  ToolCallOutput out = parser.Push(text);
  ToolCallOutput last = parser.Finish();
  out.content += last.content;
  for (ParsedToolCall& call : last.calls) out.calls.push_back(std::move(call));
  return out;
}

ToolCallOutput ToolCallParser::Push(std::string_view text) {
  ToolCallOutput out;
  pending_.append(text);
  Drain(false, out);
  return out;
}

ToolCallOutput ToolCallParser::Finish() {
  ToolCallOutput out;
  Drain(true, out);
  if (n_calls_ == 0) out.content += held_ws_;  // no calls: the whitespace was content after all
  held_ws_.clear();
  return out;
}

void ToolCallParser::EmitContent(std::string_view text, ToolCallOutput& out) {
  if (text.empty()) return;
  held_ws_.append(text);
  const size_t last = held_ws_.find_last_not_of(kWhitespace);
  if (last == std::string::npos) return;
  out.content.append(held_ws_, 0, last + 1);
  held_ws_.erase(0, last + 1);
}

void ToolCallParser::AddCall(ParsedToolCall call, ToolCallOutput& out) {
  call.id = NewToolCallId(format_);
  out.calls.push_back(std::move(call));
  ++n_calls_;
}

void ToolCallParser::Drain(bool final, ToolCallOutput& out) {
  bool more = true;
  while (more) {
    if (mode_ == Mode::kPlain || format_ == ToolFormat::kNone || format_ == ToolFormat::kHarmony ||
        format_ == ToolFormat::kGemma4) {
      EmitContent(pending_, out);
      pending_.clear();
      return;
    }
    switch (format_) {
      case ToolFormat::kHermes:
      case ToolFormat::kQwenXml:
        more = DrainTagged(final, kHermesOpen, kHermesClose, out);
        break;
      case ToolFormat::kMistral:
        more = DrainJsonAfterMarker(final, kMistralMarker, out);
        break;
      case ToolFormat::kLlama3:
        more = mode_ == Mode::kStart ? DrainLlamaStart(final, out)
                                     : DrainJsonAfterMarker(final, kPythonTag, out);
        break;
      case ToolFormat::kNone:
      case ToolFormat::kHarmony:
      case ToolFormat::kGemma4:
        return;
    }
  }
}

bool ToolCallParser::TakeTextBefore(bool final, std::string_view marker, ToolCallOutput& out) {
  const size_t at = pending_.find(marker);
  if (at != std::string::npos) {
    EmitContent(std::string_view(pending_).substr(0, at), out);
    pending_.erase(0, at + marker.size());
    marker_ = marker;
    mode_ = Mode::kInCall;
    return true;
  }
  const size_t keep = final ? 0 : PartialMarker(pending_, marker);
  EmitContent(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

bool ToolCallParser::DrainTagged(bool final, std::string_view open, std::string_view close,
                                 ToolCallOutput& out) {
  if (mode_ != Mode::kInCall) return TakeTextBefore(final, open, out);
  const size_t end = pending_.find(close);
  if (end == std::string::npos) {
    if (!final) return false;
    EmitContent(marker_ + pending_, out);  // never closed: it was text
    pending_.clear();
    mode_ = Mode::kText;
    return false;
  }
  const std::string_view body = std::string_view(pending_).substr(0, end);
  if (format_ == ToolFormat::kQwenXml) {
    if (auto calls = CallsFromXml(body)) {
      for (ParsedToolCall& call : *calls) AddCall(std::move(call), out);
    } else {
      EmitContent(marker_ + std::string(body) + std::string(close), out);
    }
  } else if (auto calls = CallsFromText(body); calls && calls->size() == 1) {
    AddCall(std::move(calls->front()), out);
  } else {
    EmitContent(marker_ + std::string(body) + std::string(close), out);
  }
  pending_.erase(0, end + close.size());
  mode_ = Mode::kText;
  return true;
}

bool ToolCallParser::DrainJsonAfterMarker(bool final, std::string_view marker,
                                          ToolCallOutput& out) {
  if (mode_ != Mode::kInCall) return TakeTextBefore(final, marker, out);
  const size_t start = pending_.find_first_not_of(kWhitespace);
  auto give_back = [&](size_t n) {  // the marker and n bytes were text after all
    EmitContent(marker_ + pending_.substr(0, n), out);
    pending_.erase(0, n);
    mode_ = format_ == ToolFormat::kLlama3 ? Mode::kPlain : Mode::kText;
    return true;
  };
  if (start == std::string::npos) {
    if (final) give_back(pending_.size());
    return false;
  }
  const char first = pending_[start];
  if (first != '[' && first != '{') return give_back(0);
  const size_t end = JsonValueEnd(pending_, start);
  if (end == std::string::npos) {
    if (final) give_back(pending_.size());  // unfinished: text
    return false;
  }
  auto calls = CallsFromText(std::string_view(pending_).substr(start, end - start));
  if (!calls) return give_back(end);
  for (ParsedToolCall& call : *calls) AddCall(std::move(call), out);
  pending_.erase(0, end);
  mode_ = format_ == ToolFormat::kLlama3 ? Mode::kStart : Mode::kText;
  return true;
}

bool ToolCallParser::DrainLlamaStart(bool final, ToolCallOutput& out) {
  // Llama 3 answers with a call or with text: decided by how the reply (after whitespace) starts.
  const size_t start = pending_.find_first_not_of(kWhitespace);
  if (start == std::string::npos) {
    EmitContent(pending_, out);  // whitespace: held
    pending_.clear();
    return false;
  }
  const std::string_view rest = std::string_view(pending_).substr(start);
  const bool tag = rest.substr(0, kPythonTag.size()) == kPythonTag;
  if (!tag && !final && rest.size() < kPythonTag.size() &&
      kPythonTag.substr(0, rest.size()) == rest) {
    return false;  // could still become <|python_tag|>
  }
  if (!tag && rest.front() != '{') {
    mode_ = Mode::kPlain;
    return true;
  }
  EmitContent(std::string_view(pending_).substr(0, start), out);
  pending_.erase(0, start + (tag ? kPythonTag.size() : 0));
  marker_ = tag ? std::string(kPythonTag) : "";
  mode_ = Mode::kInCall;
  return true;
}

}  // namespace kvserve
