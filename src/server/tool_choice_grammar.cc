#include "server/tool_choice_grammar.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "grammar/json_schema_grammar.h"
#include "grammar/regex_gbnf.h"
#include "server/tool_call_parser.h"

namespace kvserve {
namespace {

using json = nlohmann::ordered_json;

// A tool's function.parameters ({} when it has none: any object).
Result<json> ToolParameters(const ChatTool& tool) {
  json parsed = json::parse(tool.json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::InvalidArgument("tool '" + tool.name + "': not JSON");
  json parameters = json::object();  // no parameters: any object
  if (parsed.contains("function") && parsed["function"].is_object() &&
      parsed["function"].contains("parameters")) {
    parameters = parsed["function"]["parameters"];
  }
  if (!parameters.is_object()) {
    return Status::InvalidArgument("tool '" + tool.name +
                                   "': function.parameters must be a JSON Schema object");
  }
  return parameters;
}

// One call's JSON object: {"name": <const>, <arguments key>: <parameters>}, in that order.
Result<json> CallSchema(const ChatTool& tool, const char* arguments_key) {
  auto read = ToolParameters(tool);
  if (!read.ok()) return read.status();
  json parameters = std::move(*read);
  if (!parameters.contains("type") && !parameters.contains("properties"))
    parameters["type"] = "object";
  json schema = {{"type", "object"},
                 {"properties", {{"name", {{"const", tool.name}}}, {arguments_key, parameters}}},
                 {"required", {"name", arguments_key}},
                 {"additionalProperties", false}};
  return schema;
}

// kQwenXml: a string parameter's text, which never holds "</" (so "\n</parameter>" cannot occur
// in it and the first "</parameter>" closes it, as the parser reads it).
constexpr std::string_view kXmlTextRule = "xml-text ::= ( [^<] | \"<\"+ [^</] )* \"<\"*\n";

// A string parameter with minLength or maxLength: that many characters, none of them '<' (a
// bounded xml-text cannot count its characters in GBNF, so the bound is kept exactly by giving up
// '<'; the value always meets the schema). "" when the schema bounds nothing.
std::string XmlBoundedText(const json& schema) {
  auto bound = [&](const char* key) -> std::optional<uint64_t> {
    if (!schema.contains(key) || !schema[key].is_number_unsigned()) return std::nullopt;
    return schema[key].get<uint64_t>();
  };
  const std::optional<uint64_t> min = bound("minLength"), max = bound("maxLength");
  if (!min && !max) return "";
  return "[^<]{" + std::to_string(min.value_or(0)) + "," + (max ? std::to_string(*max) : "") + "}";
}

// A string parameter's value: one of its enum's (or its const) strings, else its bounded text,
// else any xml-text.
std::string XmlStringValue(const json& schema) {
  json values = json::array();
  if (schema.contains("const")) values.push_back(schema["const"]);
  if (schema.contains("enum") && schema["enum"].is_array()) values = schema["enum"];
  std::string alternatives;
  for (const json& v : values) {
    if (!v.is_string()) return "xml-text";
    alternatives += (alternatives.empty() ? "" : " | ") + GbnfLiteral(v.get<std::string>());
  }
  if (!alternatives.empty()) return "( " + alternatives + " )";
  const std::string bounded = XmlBoundedText(schema);
  return bounded.empty() ? "xml-text" : bounded;
}

// The rule of one forced tool's call ("xml-call-K ::= ..."): its parameters in the schema's
// order, the required ones always, the others optionally; a string parameter as text, any other
// as JSON of its schema (a rule of `documents`, whose schemas point into `parameters`).
Result<std::string> XmlCallRule(const ChatTool& tool, size_t k, const json& parameters,
                                std::vector<JsonSchemaRule>& documents) {
  std::string body = GbnfLiteral("<tool_call>\n<function=" + tool.name + ">\n");
  if (parameters.contains("properties")) {
    const json& properties = parameters["properties"];
    if (!properties.is_object()) {
      return Status::InvalidArgument("tool '" + tool.name +
                                     "': function.parameters.properties must be an object");
    }
    const json required = parameters.value("required", json::array());
    size_t j = 0;
    for (const auto& [key, schema] : properties.items()) {
      std::string value;
      if (QwenXmlStringParameter(schema)) {
        value = XmlStringValue(schema);
      } else {
        value = "xml-t" + std::to_string(k) + "-p" + std::to_string(j);
        documents.push_back({value, &parameters, &schema,
                             "tool '" + tool.name + "': parameters.properties." + key});
      }
      ++j;
      const std::string piece = GbnfLiteral("<parameter=" + key + ">\n") + " " + value + " " +
                                GbnfLiteral("\n</parameter>\n");
      const bool must =
          required.is_array() && std::find(required.begin(), required.end(), key) != required.end();
      body += must ? " " + piece : " ( " + piece + " )?";
    }
  }
  body += " " + GbnfLiteral("</function>\n</tool_call>");
  return "xml-call-" + std::to_string(k) + " ::= " + body + "\n";
}

// kQwenXml: one or more <tool_call> blocks (one when not parallel), separated by a newline.
Result<std::optional<ForcedToolCalls>> QwenXmlGrammar(std::span<const ChatTool> tools,
                                                      const std::vector<std::string>& forced,
                                                      bool parallel, const GrammarLimits& limits) {
  std::vector<json> parameters;
  parameters.reserve(tools.size());  // documents point into it: it must not move
  std::vector<JsonSchemaRule> documents;
  std::string calls;
  std::string rules;
  for (const ChatTool& tool : tools) {
    if (std::find(forced.begin(), forced.end(), tool.name) == forced.end()) continue;
    auto read = ToolParameters(tool);
    if (!read.ok()) return read.status();
    parameters.push_back(std::move(*read));
    const size_t k = parameters.size() - 1;
    auto rule = XmlCallRule(tool, k, parameters.back(), documents);
    if (!rule.ok()) return rule.status();
    rules += *rule;
    calls += (calls.empty() ? "" : " | ") + std::string("xml-call-") + std::to_string(k);
  }
  if (calls.empty()) return Status::InvalidArgument("tool_choice: no tool to call");
  auto values = JsonSchemaRulesToGbnf(documents, limits);
  if (!values.ok()) return Status::InvalidArgument("tools: " + values.message());
  ForcedToolCalls out;
  out.gbnf = std::string("root ::= xml-call") + (parallel ? " ( \"\\n\" xml-call )*" : "") +
             "\nxml-call ::= " + calls + "\n" + rules + std::string(kXmlTextRule) + *values;
  return std::optional<ForcedToolCalls>(std::move(out));
}

// kHarmony: the call's header is control tokens (<|channel|>, <|constrain|>, <|message|>) that a
// grammar over text cannot write, so the one forced function's header is the answer's prefix and
// the grammar is its arguments' JSON; the model's <|call|> ends it. Several functions to choose
// from would need the name inside the grammar, before <|message|>: refused.
Result<std::optional<ForcedToolCalls>> HarmonyGrammar(std::span<const ChatTool> tools,
                                                      const std::vector<std::string>& forced,
                                                      const GrammarLimits& limits) {
  if (forced.size() != 1) {
    return Status::InvalidArgument(
        "tool_choice: \"required\" with " + std::to_string(forced.size()) +
        " tools cannot be enforced in gpt-oss's harmony format (a call's header is control "
        "tokens, which a grammar cannot write); name one function");
  }
  for (const ChatTool& tool : tools) {
    if (tool.name != forced[0]) continue;
    auto read = ToolParameters(tool);
    if (!read.ok()) return read.status();
    json parameters = std::move(*read);
    if (!parameters.contains("type") && !parameters.contains("properties"))
      parameters["type"] = "object";
    auto arguments = JsonSchemaToGbnf(parameters, limits, "arguments");
    if (!arguments.ok()) {
      return Status::InvalidArgument("tools: tool '" + tool.name + "': " + arguments.message());
    }
    return std::optional<ForcedToolCalls>(ForcedToolCalls{
        .gbnf = "root ::= arguments\n" + *arguments,
        .answer_prefix =
            "<|channel|>commentary to=functions." + tool.name + " <|constrain|>json<|message|>"});
  }
  return Status::InvalidArgument("tool_choice: no tool to call");
}

}  // namespace

Result<std::optional<ForcedToolCalls>> ForcedToolCallGrammar(ToolFormat format,
                                                             std::span<const ChatTool> tools,
                                                             const std::vector<std::string>& forced,
                                                             bool parallel,
                                                             const GrammarLimits& limits) {
  if (format == ToolFormat::kNone) return std::optional<ForcedToolCalls>();
  if (format == ToolFormat::kQwenXml) return QwenXmlGrammar(tools, forced, parallel, limits);
  if (format == ToolFormat::kHarmony) return HarmonyGrammar(tools, forced, limits);
  if (format == ToolFormat::kGemma4) {
    return Status::InvalidArgument(
        "tool_choice: \"required\" or a named function is not supported with the gemma4 chat "
        "template (no grammar for its call syntax); use \"auto\"");
  }
  const char* arguments_key = format == ToolFormat::kLlama3 ? "parameters" : "arguments";
  json any_of = json::array();
  for (const ChatTool& tool : tools) {
    if (std::find(forced.begin(), forced.end(), tool.name) == forced.end()) continue;
    auto call = CallSchema(tool, arguments_key);
    if (!call.ok()) return call.status();
    // Each call alone first, so that a schema the engine refuses is named by its tool.
    if (auto alone = JsonSchemaToGbnf(*call, limits, "tool-call"); !alone.ok()) {
      return Status::InvalidArgument("tools: tool '" + tool.name + "': " + alone.message());
    }
    any_of.push_back(std::move(*call));
  }
  if (any_of.empty()) return Status::InvalidArgument("tool_choice: no tool to call");
  const json schema = any_of.size() == 1 ? any_of[0] : json{{"anyOf", any_of}};
  auto call = JsonSchemaToGbnf(schema, limits, "tool-call");
  if (!call.ok()) return Status::InvalidArgument("tools: " + call.message());
  ForcedToolCalls out;
  if (format == ToolFormat::kLlama3) {
    out.gbnf = "root ::= tool-call\n";
  } else if (format == ToolFormat::kMistral) {
    out.answer_prefix = "[TOOL_CALLS]";
    out.gbnf = std::string("root ::= \"[\" tool-call ") +
               (parallel ? "( \", \" tool-call )* " : "") + "\"]\"\n";
  } else {
    const std::string one = "\"<tool_call>\\n\" tool-call \"\\n</tool_call>\"";
    out.gbnf = "root ::= " + one + (parallel ? " ( \"\\n\" " + one + " )*" : "") + "\n";
  }
  out.gbnf += *call;
  return std::optional<ForcedToolCalls>(std::move(out));
}

}  // namespace kvserve
