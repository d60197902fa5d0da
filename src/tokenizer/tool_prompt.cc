#include "tokenizer/tool_prompt.h"

#include <algorithm>
#include <initializer_list>

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

// The template's json_to_python_type macro. Jinja quirks kept: `items` of an array is the dict's
// items, so arrays are "list[Union[]]", and a spec without a type is "Union[]". A type name the
// macro does not know makes it recurse without end; here it is "Any".
std::string PythonType(const OrderedJson& spec) {
  if (!spec.is_object() || !spec.contains("type")) return "Union[]";
  const OrderedJson& type = spec["type"];
  if (type.is_array()) {
    std::string out = "Union[";
    for (size_t i = 0; i < type.size(); ++i) {
      if (i > 0) out += ",";
      out += PythonType(OrderedJson{{"type", type[i]}});
    }
    return out + "]";
  }
  if (!type.is_string()) return "Any";
  const std::string& name = type.get_ref<const std::string&>();
  if (name == "string") return "str";
  if (name == "number") return "float";
  if (name == "integer") return "int";
  if (name == "boolean") return "bool";
  if (name == "array") return "list[Union[]]";
  if (name == "object") {
    return spec.contains("additionalProperties")
               ? "dict[str, " + PythonType(spec["additionalProperties"]) + "]"
               : "dict";
  }
  return "Any";
}

// Jinja's trim of a value that may be absent ("" then).
std::string TrimmedText(const OrderedJson& value) {
  if (!value.is_string()) return "";
  const std::string& text = value.get_ref<const std::string&>();
  const size_t first = text.find_first_not_of(" \t\n\r\v\f");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r\v\f") - first + 1);
}

// object[key] when it is a string, else "" (nothing here throws on odd client JSON).
std::string StringField(const OrderedJson& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// object[key] when it is an object, else {}.
OrderedJson ObjectField(const OrderedJson& object, const char* key) {
  if (!object.is_object()) return OrderedJson::object();
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : OrderedJson::object();
}

// One tool of Hermes 3's list.
std::string Hermes3Tool(const ChatTool& tool) {
  OrderedJson function = OrderedJson::parse(tool.json, nullptr, false);
  if (function.is_object() && function.contains("function")) function = function["function"];
  if (!function.is_object()) return tool.json;
  const std::string name = StringField(function, "name");
  const OrderedJson parameters = ObjectField(function, "parameters");
  const OrderedJson properties = ObjectField(parameters, "properties");
  std::string out = "{\"type\": \"function\", \"function\": {\"name\": \"" + name +
                    "\", \"description\": \"" + name + "(";
  std::string args;
  bool first = true;
  for (const auto& [param, fields] : properties.items()) {
    if (!first) out += ", ";
    out += param + ": " + PythonType(fields);
    args += (first ? "    Args:\n" : "") + std::string("        ") + param + "(" +
            PythonType(fields) + "): " +
            TrimmedText(ObjectField(properties, param.c_str()).value("description", OrderedJson()));
    first = false;
  }
  out += ")";
  const bool returns = function.contains("return");
  if (returns) out += " -> " + PythonType(function["return"]);
  out += " - " + StringField(function, "description") + "\n\n" + args;
  if (returns && function["return"].is_object() && function["return"].contains("description")) {
    out += "\n    Returns:\n        " + StringField(function["return"], "description");
  }
  out += "\", \"parameters\": ";
  out += properties.empty() ? "{}" : JinjaToJson(parameters.dump()).value_or("{}");
  return out + "}";
}

// Python's repr of a JSON value (what Jinja's `string` filter prints inside a list or dict).
std::string PythonRepr(const OrderedJson& value);

// Jinja's `string` filter on a JSON value: a string as it is, true/false/null as Python's
// True/False/None, numbers as json.dumps writes them (Python's repr), lists and dicts as repr.
std::string PythonString(const OrderedJson& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  if (value.is_number()) return JinjaToJson(value.dump()).value_or(value.dump());
  return PythonRepr(value);
}

std::string PythonQuote(const std::string& text) {
  const char quote =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string PythonRepr(const OrderedJson& value) {
  if (value.is_string()) return PythonQuote(value.get<std::string>());
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i > 0 ? ", " : "") + PythonRepr(value[i]);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "" : ", ") + PythonQuote(key) + ": " + PythonRepr(item);
      first = false;
    }
    return out + "}";
  }
  return PythonString(value);
}

// A value as the Qwen XML templates print it: objects and arrays through tojson, anything else
// through the `string` filter.
std::string QwenXmlValue(const OrderedJson& value) {
  if (value.is_object() || value.is_array()) {
    return JinjaToJson(value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace))
        .value_or("null");
  }
  return PythonString(value);
}

// Qwen3-Coder's render_extra_keys macro: each key of `object` not in `handled` as
// "\n<key>value</key>".
void AppendExtraKeys(const OrderedJson& object, std::initializer_list<std::string_view> handled,
                     ChatText& out) {
  if (!object.is_object()) return;
  for (const auto& [key, value] : object.items()) {
    if (std::find(handled.begin(), handled.end(), key) != handled.end()) continue;
    const std::string text = QwenXmlValue(value);
    out.AppendAll({"\n<", MessageText(key), ">", MessageText(text), "</", MessageText(key), ">"});
  }
}

// Qwen3-Coder: one parameter of a tool's list.
void AppendQwen3CoderParameter(const std::string& name, const OrderedJson& fields, ChatText& out) {
  out.AppendAll({"\n<parameter>\n<name>", MessageText(name), "</name>"});
  if (fields.is_object() && fields.contains("type")) {
    const std::string type = PythonString(fields["type"]);
    out.AppendAll({"\n<type>", MessageText(type), "</type>"});
  }
  if (fields.is_object() && fields.contains("description")) {
    const std::string description = TrimmedText(OrderedJson(PythonString(fields["description"])));
    out.AppendAll({"\n<description>", MessageText(description), "</description>"});
  }
  AppendExtraKeys(fields, {"name", "type", "description"}, out);
  out += "\n</parameter>";
}

// Qwen3-Coder: one tool of the list.
void AppendQwen3CoderTool(const ChatTool& tool, ChatText& out) {
  OrderedJson function = OrderedJson::parse(tool.json, nullptr, false);
  if (function.is_object() && function.contains("function")) function = function["function"];
  if (!function.is_object()) function = OrderedJson::object();
  const std::string name = function.contains("name") ? PythonString(function["name"]) : "";
  out.AppendAll({"\n<function>\n<name>", MessageText(name), "</name>"});
  if (function.contains("description")) {
    const std::string description = TrimmedText(OrderedJson(PythonString(function["description"])));
    out.AppendAll({"\n<description>", MessageText(description), "</description>"});
  }
  out += "\n<parameters>";
  const OrderedJson parameters = function.value("parameters", OrderedJson());
  if (parameters.is_object() && parameters.contains("properties") &&
      parameters["properties"].is_object()) {
    for (const auto& [param, fields] : parameters["properties"].items()) {
      AppendQwen3CoderParameter(param, fields, out);
    }
  }
  AppendExtraKeys(parameters, {"type", "properties"}, out);
  out += "\n</parameters>";
  AppendExtraKeys(function, {"type", "name", "description", "parameters"}, out);
  out += "\n</function>";
}

}  // namespace

void AppendHermes3System(std::span<const ChatTool> tools, ChatText& out) {
  out +=
      "<|im_start|>system\nYou are a function calling AI model. You are provided with function "
      "signatures within "
      "<tools></tools> XML tags. You may call one or more functions to assist with the user "
      "query. Don't make assumptions about what values to plug into functions. Here are the "
      "available tools: <tools> ";
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i > 0) out += "\n";
    const std::string tool = Hermes3Tool(tools[i]);
    out.AppendMessage(tool);
  }
  out +=
      " </tools>Use the following pydantic model json schema for each tool call you will make: "
      "{\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": "
      "{\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", "
      "\"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\nFor each function call "
      "return a json object with function name and arguments within <tool_call></tool_call> XML "
      "tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-dict>}\n</tool_call><|im_end|>\n";
}

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

void AppendQwenXmlToolCall(const ChatToolCall& call, ChatText& out) {
  out.AppendAll({"<tool_call>\n<function=", MessageText(call.name), ">\n"});
  const OrderedJson arguments = JsonNestingDepth(call.arguments) > kMaxJinjaJsonDepth
                                    ? OrderedJson()
                                    : OrderedJson::parse(call.arguments, nullptr, false);
  if (arguments.is_object()) {
    for (const auto& [key, value] : arguments.items()) {
      const std::string text = QwenXmlValue(value);
      out.AppendAll(
          {"<parameter=", MessageText(key), ">\n", MessageText(text), "\n</parameter>\n"});
    }
  }
  out += "</function>\n</tool_call>";
}

void AppendQwen35System(std::string_view system, std::span<const ChatTool> tools, ChatText& out) {
  out += "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
  for (const ChatTool& tool : tools) {
    const std::string json = ToolJson(tool, -1);
    out.AppendAll({"\n", MessageText(json)});
  }
  out +=
      "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
      "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
      "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
      "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
      "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
      "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
      "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
      "function call in natural language BEFORE the function call, but NOT after\n- If there is "
      "no function call available, answer the question like normal with your current knowledge "
      "and do not tell the user about function calls\n</IMPORTANT>";
  if (!system.empty()) out.AppendAll({"\n\n", MessageText(system)});
  out += "<|im_end|>\n";
}

void AppendQwen3CoderTools(std::span<const ChatTool> tools, ChatText& out) {
  out += "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>";
  for (const ChatTool& tool : tools) AppendQwen3CoderTool(tool, out);
  out +=
      "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO "
      "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
      "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nvalue_2\n</parameter>\n"
      "</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
      "specified format: the tool calling block MUST begin with an opening <tool_call> tag and "
      "end with a closing </tool_call> tag.\n- Required parameters MUST be specified\n- You may "
      "provide optional reasoning for your function call in natural language BEFORE the function "
      "call, but NOT after\n- If there is no function call available, answer the question like "
      "normal with your current knowledge and do not tell the user about function "
      "calls\n</IMPORTANT>";
}

}  // namespace kvserve
