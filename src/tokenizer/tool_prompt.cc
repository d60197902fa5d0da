#include "tokenizer/tool_prompt.h"

#include <nlohmann/json.hpp>

#include "tokenizer/jinja_json.h"

namespace kvserve {

namespace {

using OrderedJson = nlohmann::ordered_json;

// A tool's JSON as tojson prints it (indent < 0: one line); the text as it is if it is not JSON
// (the server only hands over parsed objects).
std::string ToolJson(const ChatTool& tool, int indent) {
  return JinjaToJson(tool.json, indent).value_or(tool.json);
}

constexpr std::string_view kHermesToolsIntro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kHermesToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

constexpr std::string_view kLlama3ToolsIntro =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";

}  // namespace

std::string ToolArgumentsText(std::string_view arguments) {
  return JinjaToJson(arguments).value_or(std::string(arguments));
}

void AppendHermesSystem(std::string_view system, std::span<const ChatTool> tools, ChatText& out) {
  out += "<|im_start|>system\n";
  if (!system.empty()) out.AppendAll({MessageText(system), "\n\n"});
  out += kHermesToolsIntro;
  for (const ChatTool& tool : tools) {
    const std::string json = ToolJson(tool, -1);
    out.AppendAll({"\n", MessageText(json)});
  }
  out += kHermesToolsOutro;
}

void AppendHermesToolCalls(const ChatMessage& message, const TurnMarkup& turns, ChatText& out) {
  out.AppendAll(
      {turns.open, MessageText(message.role), turns.after_role, MessageText(message.content)});
  for (size_t i = 0; i < message.tool_calls.size(); ++i) {
    const ChatToolCall& call = message.tool_calls[i];
    if (i > 0 || !message.content.empty()) out += "\n";
    const std::string arguments = ToolArgumentsText(call.arguments);
    out.AppendAll({"<tool_call>\n{\"name\": \"", MessageText(call.name),
                   "\", \"arguments\": ", MessageText(arguments), "}\n</tool_call>"});
  }
  out += turns.close;
}

void AppendHermesToolResult(std::span<const ChatMessage> messages, size_t i,
                            const TurnMarkup& turns, ChatText& out) {
  if (i == 0 || messages[i - 1].role != "tool") out += turns.results_open;
  out.AppendAll({"\n<tool_response>\n", MessageText(messages[i].content), "\n</tool_response>"});
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += turns.close;
}

std::string GraniteToolsSystem(std::string_view system, std::span<const ChatTool> tools) {
  std::string text(system);
  if (!text.empty()) text += "\n\n";
  text +=
      "You are a helpful assistant with access to the following tools. You may call one or more "
      "tools to assist with the user query.\n\nYou are provided with function signatures within "
      "<tools></tools> XML tags:\n<tools>";
  for (const ChatTool& tool : tools) text += "\n" + ToolJson(tool, -1);
  text +=
      "\n</tools>\n\nFor each tool call, return a json object with function name and arguments "
      "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-json-object>}\n</tool_call>. If a tool does not exist in the provided "
      "list of tools, notify the user that you do not have the ability to fulfill the request.";
  return text;
}

void AppendLlama3ToolsTurn(std::string_view first_user, std::span<const ChatTool> tools,
                           ChatText& out) {
  out.AppendAll({"<|start_header_id|>user<|end_header_id|>\n\n", kLlama3ToolsIntro});
  for (const ChatTool& tool : tools) {
    const std::string json = ToolJson(tool, 4);
    out.AppendAll({MessageText(json), "\n\n"});
  }
  out.AppendAll({MessageText(first_user), "<|eot_id|>"});
}

void AppendLlama3ToolCall(const ChatMessage& message, ChatText& out) {
  const ChatToolCall& call = message.tool_calls.front();  // CheckToolUse: exactly one
  const std::string arguments = ToolArgumentsText(call.arguments);
  out.AppendAll({"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"",
                 MessageText(call.name), "\", \"parameters\": ", MessageText(arguments),
                 "}<|eot_id|>"});
}

void AppendLlama3ToolResult(const ChatMessage& message, ChatText& out) {
  const std::string quoted = JinjaQuote(message.content);
  out.AppendAll(
      {"<|start_header_id|>ipython<|end_header_id|>\n\n", MessageText(quoted), "<|eot_id|>"});
}

void AppendMistralTools(std::span<const ChatTool> tools, ChatText& out) {
  out += "[AVAILABLE_TOOLS][";
  for (size_t t = 0; t < tools.size(); ++t) {
    // '{"type": "function", "function": {' then each key of the function but "return": a string
    // value written between quotes as it is, anything else through tojson.
    std::string function;
    const OrderedJson tool = OrderedJson::parse(tools[t].json, nullptr, false);
    if (tool.is_object() && tool.contains("function") && tool["function"].is_object()) {
      bool first = true;
      for (const auto& [key, value] : tool["function"].items()) {
        if (key == "return") continue;
        if (!first) function += ", ";
        first = false;
        function += "\"" + key + "\": ";
        function += value.is_string() ? "\"" + value.get<std::string>() + "\""
                                      : JinjaToJson(value.dump()).value_or("null");
      }
    }
    out.AppendAll({"{\"type\": \"function\", \"function\": {", MessageText(function), "}}",
                   t + 1 < tools.size() ? ", " : "]"});
  }
  out += "[/AVAILABLE_TOOLS]";
}

void AppendMistralToolCalls(const ChatMessage& message, std::string_view eos, ChatText& out) {
  out += "[TOOL_CALLS][";
  for (size_t i = 0; i < message.tool_calls.size(); ++i) {
    const ChatToolCall& call = message.tool_calls[i];
    // tool_call.function|tojson without its closing brace, then the id.
    const std::string name = JinjaQuote(call.name);
    const std::string arguments = ToolArgumentsText(call.arguments);
    out.AppendAll({"{\"name\": ", MessageText(name), ", \"arguments\": ", MessageText(arguments),
                   ", \"id\": \"", MessageText(call.id), "\"}"});
    if (i + 1 < message.tool_calls.size()) {
      out += ", ";
    } else {
      out.AppendAll({"]", eos});
    }
  }
}

void AppendMistralToolResult(const ChatMessage& message, ChatText& out) {
  out.AppendAll({"[TOOL_RESULTS]{\"content\": ", MessageText(message.content), ", \"call_id\": \"",
                 MessageText(message.tool_call_id), "\"}[/TOOL_RESULTS]"});
}

}  // namespace kvserve
