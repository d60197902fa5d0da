#include "server/tool_choice_grammar.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "grammar/json_schema_grammar.h"

namespace kvserve {
namespace {

using json = nlohmann::ordered_json;

// One call's JSON object: {"name": <const>, <arguments key>: <parameters>}, in that order.
Result<json> CallSchema(const ChatTool& tool, const char* arguments_key) {
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
  if (!parameters.contains("type") && !parameters.contains("properties"))
    parameters["type"] = "object";
  json schema = {{"type", "object"},
                 {"properties", {{"name", {{"const", tool.name}}}, {arguments_key, parameters}}},
                 {"required", {"name", arguments_key}},
                 {"additionalProperties", false}};
  return schema;
}

}  // namespace

Result<std::optional<ForcedToolCalls>> ForcedToolCallGrammar(ToolFormat format,
                                                             std::span<const ChatTool> tools,
                                                             const std::vector<std::string>& forced,
                                                             bool parallel,
                                                             const GrammarLimits& limits) {
  if (format == ToolFormat::kNone) return std::optional<ForcedToolCalls>();
  const char* arguments_key = format == ToolFormat::kLlama3 ? "parameters" : "arguments";
  json any_of = json::array();
  for (const ChatTool& tool : tools) {
    if (std::find(forced.begin(), forced.end(), tool.name) == forced.end()) continue;
    auto call = CallSchema(tool, arguments_key);
    if (!call.ok()) return call.status();
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
