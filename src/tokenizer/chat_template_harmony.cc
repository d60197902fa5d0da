// gpt-oss's harmony format (ChatTemplate::RenderHarmony, CheckHarmony), written as its Jinja
// template writes it (../shared/models/chat-templates/openai-gpt-oss-120b.jinja; checked against
// Jinja2 by tests/harmony_render_test.cc over tests/data/harmony). The tools become a TypeScript
// namespace by the template's render_typescript_type macro, whose quirks are kept: the source's
// indentation printed before a nested object's property types and a oneOf variant's default, a
// oneOf of objects not turned into "any" (its flag is set inside a loop scope), array types over
// 50 characters written "any[]".
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_strings.h"

namespace kvserve {
namespace {

using Json = nlohmann::ordered_json;
using jinja::Contains;

// Nested schemas deeper than this are written "any" (client input; the macro recurses).
constexpr int kMaxTypeDepth = 32;
// What the template prints before a nested object's property type and a oneOf variant's
// default: its own indentation, after a `{{` without '-'.
constexpr std::string_view kPropertyIndent = "\n                ";
constexpr std::string_view kVariantDefaultIndent = "                    ";

const Json* Get(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Jinja's truth of a value: absent, null, false, 0, "" and empty containers are false.
bool Truthy(const Json* value) {
  if (value == nullptr || value->is_null()) return false;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_number()) return value->get<double>() != 0;
  return !value->empty();  // strings, arrays, objects
}

bool IsString(const Json* value, std::string_view text) {
  return value != nullptr && value->is_string() && value->get_ref<const std::string&>() == text;
}

// Jinja's string of a value (what `+` and `join` print): strings as they are, Python's names for
// true, false and null, JSON for the rest.
std::string PyStr(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  return value.dump();
}

std::string ToJson(const Json& value) {
  const std::string text = value.dump();
  return JinjaToJson(text).value_or(text);
}

std::string Join(const Json& list, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i)
    out += (i ? std::string(separator) : "") + PyStr(list[i]);
  return out;
}

bool Required(const Json& schema, const std::string& name) {
  const Json* required = Get(schema, "required");
  if (required == nullptr || !required->is_array()) return false;
  for (const Json& item : *required) {
    if (item.is_string() && item.get_ref<const std::string&>() == name) return true;
  }
  return false;
}

size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string TypeScriptType(const Json& spec, int depth);

std::string ArrayType(const Json& spec, int depth) {
  std::string out = "any[]";
  if (const Json* items = Get(spec, "items"); Truthy(items)) {
    const Json* type = Get(*items, "type");
    if (IsString(type, "string")) {
      out = "string[]";
    } else if (IsString(type, "number") || IsString(type, "integer")) {
      out = "number[]";
    } else if (IsString(type, "boolean")) {
      out = "boolean[]";
    } else {
      const std::string inner = TypeScriptType(*items, depth + 1);
      if (inner != "object | object" && CodePoints(inner) <= 50) out = inner + "[]";
    }
  }
  if (Truthy(Get(spec, "nullable"))) out += " | null";
  return out;
}

std::string OneOfType(const Json& variants, int depth) {
  std::string out;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Json& variant = variants[i];
    out += TypeScriptType(variant, depth + 1);
    if (const Json* description = Get(variant, "description"); Truthy(description)) {
      out += "// " + PyStr(*description);
    }
    if (const Json* fallback = Get(variant, "default")) {
      out += std::string(kVariantDefaultIndent) + "// default: " + ToJson(*fallback);
    }
    if (i + 1 < variants.size()) out += " | \n";
  }
  return out;
}

std::string ObjectType(const Json& spec, const Json& properties, int depth) {
  std::string out = "{\n";
  size_t i = 0;
  for (const auto& [name, property] : properties.items()) {
    out += name + (Required(spec, name) ? "" : "?") + ": " + std::string(kPropertyIndent) +
           TypeScriptType(property, depth + 1);
    if (++i < properties.size()) out += ", ";
  }
  return out + "}";
}

// The template's render_typescript_type macro.
std::string TypeScriptType(const Json& spec, int depth) {
  if (depth > kMaxTypeDepth) return "any";
  const Json* type = Get(spec, "type");
  if (IsString(type, "array")) return ArrayType(spec, depth);
  if (type != nullptr && type->is_array() && !type->empty()) {
    return type->size() > 1 ? Join(*type, " | ") : PyStr((*type)[0]);
  }
  if (const Json* variants = Get(spec, "oneOf"); Truthy(variants) && variants->is_array()) {
    return OneOfType(*variants, depth);
  }
  if (IsString(type, "string")) {
    if (const Json* values = Get(spec, "enum"); Truthy(values) && values->is_array()) {
      return "\"" + Join(*values, "\" | \"") + "\"";
    }
    return Truthy(Get(spec, "nullable")) ? "string | null" : "string";
  }
  if (IsString(type, "number") || IsString(type, "integer")) return "number";
  if (IsString(type, "boolean")) return "boolean";
  if (IsString(type, "object")) {
    const Json* properties = Get(spec, "properties");
    return Truthy(properties) && properties->is_object() ? ObjectType(spec, *properties, depth)
                                                         : "object";
  }
  return "any";
}

// One tool of the namespace: its description, then its type from its parameters.
void AppendToolType(const Json& function, ChatText& out) {
  const Json* description = Get(function, "description");
  const Json* name = Get(function, "name");
  out.AppendAll({"// ", MessageText(description ? PyStr(*description) : ""), "\ntype ",
                 MessageText(name ? PyStr(*name) : ""), " = "});
  const Json* parameters = Get(function, "parameters");
  const Json* properties = parameters ? Get(*parameters, "properties") : nullptr;
  if (!Truthy(parameters) || !Truthy(properties) || !properties->is_object()) {
    out += "() => any;\n\n";
    return;
  }
  out += "(_: {\n";
  for (const auto& [key, spec] : properties->items()) {
    if (const Json* text = Get(spec, "description"); Truthy(text)) {
      out.AppendAll({"// ", MessageText(PyStr(*text)), "\n"});
    }
    std::string line =
        key + (Required(*parameters, key) ? "" : "?") + ": " + TypeScriptType(spec, 0);
    if (const Json* fallback = Get(spec, "default")) {
      if (Truthy(Get(spec, "enum"))) {
        line += ", // default: " + PyStr(*fallback);
      } else if (Truthy(Get(spec, "oneOf"))) {
        line += "// default: " + PyStr(*fallback);
      } else {
        line += ", // default: " + ToJson(*fallback);
      }
    }
    out.AppendAll({MessageText(line), ",\n"});
  }
  out += "}) => any;\n\n";
}

// The template's render_tool_namespace("functions", tools).
void AppendToolNamespace(std::span<const ChatTool> tools, ChatText& out) {
  out += "## functions\n\nnamespace functions {\n\n";
  for (const ChatTool& tool : tools) {
    const Json parsed = Json::parse(tool.json, nullptr, /*allow_exceptions=*/false);
    const Json* function = Get(parsed, "function");
    AppendToolType(function != nullptr ? *function : Json::object(), out);
  }
  out += "} // namespace functions";
}

// A call's arguments as `arguments|tojson` prints them: the object its JSON text spells (what
// llama.cpp and vLLM hand the template), or a quoted string when the text is not JSON.
std::string HarmonyArguments(std::string_view arguments) {
  return JinjaToJson(arguments).value_or(JinjaQuote(arguments));
}

// An assistant turn with tool calls: its analysis (content, else reasoning) unless a later
// assistant turn answered without calls, then its first call (the template writes one).
void AppendHarmonyCall(const ChatMessage& m, bool later_final, ChatText& out) {
  std::string_view analysis = m.content;
  if (analysis.empty() && m.reasoning) analysis = *m.reasoning;
  if (!analysis.empty() && !later_final) {
    out.AppendAll(
        {"<|start|>assistant<|channel|>analysis<|message|>", MessageText(analysis), "<|end|>"});
  }
  const ChatToolCall& call = m.tool_calls.front();
  out.AppendAll({"<|start|>assistant to=functions.", MessageText(call.name),
                 "<|channel|>commentary json<|message|>",
                 MessageText(HarmonyArguments(call.arguments)), "<|call|>"});
}

constexpr std::string_view kChannelTags[] = {"<|channel|>analysis<|message|>",
                                             "<|channel|>final<|message|>"};

bool HasChannelTag(std::string_view text) {
  for (std::string_view tag : kChannelTags) {
    if (Contains(text, tag)) return true;
  }
  return false;
}

}  // namespace

void ChatTemplate::RenderHarmony(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatTool> tools, std::string_view reasoning_effort,
                                 ChatText& out) const {
  out.AppendAll(
      {"<|start|>system<|message|>", model_identity_, "\n", cutoff_, "Current date: ", Date(),
       "\n\nReasoning: ", MessageText(reasoning_effort.empty() ? "medium" : reasoning_effort),
       "\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
       "every message."});
  if (!tools.empty()) {
    out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  }
  out += "<|end|>";
  std::string_view developer;
  if (!messages.empty() && messages[0].role == "system") {
    developer = messages[0].content;
    messages = messages.subspan(1);
  }
  if (!developer.empty() || !tools.empty()) {
    out += "<|start|>developer<|message|>";
    if (!developer.empty()) out.AppendAll({"# Instructions\n\n", MessageText(developer), "\n\n"});
    if (!tools.empty()) {
      out += "# Tools\n\n";
      AppendToolNamespace(tools, out);
    }
    out += "<|end|>";
  }
  std::optional<std::string_view> last_call;  // the name a tool result answers
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      const bool later_final =
          std::any_of(messages.begin() + static_cast<ptrdiff_t>(i) + 1, messages.end(),
                      [](const ChatMessage& later) {
                        return later.role == "assistant" && later.tool_calls.empty();
                      });
      AppendHarmonyCall(m, later_final, out);
      last_call = m.tool_calls.front().name;
    } else if (m.role == "assistant" && i + 1 == messages.size() && !add_generation_prompt) {
      if (m.reasoning) {  // the training form: the last turn keeps its analysis
        out.AppendAll({"<|start|>assistant<|channel|>analysis<|message|>",
                       MessageText(*m.reasoning), "<|end|>"});
      }
      out.AppendAll(
          {"<|start|>assistant<|channel|>final<|message|>", MessageText(m.content), "<|return|>"});
    } else if (m.role == "assistant") {
      out.AppendAll(
          {"<|start|>assistant<|channel|>final<|message|>", MessageText(m.content), "<|end|>"});
      last_call.reset();
    } else if (m.role == "tool" && last_call) {  // without a call the template raises
      out.AppendAll({"<|start|>functions.", MessageText(*last_call),
                     " to=assistant<|channel|>commentary<|message|>",
                     MessageText(JinjaQuote(m.content)), "<|end|>"});
    } else if (m.role == "user") {
      out.AppendAll({"<|start|>user<|message|>", MessageText(m.content), "<|end|>"});
    }
  }
  if (add_generation_prompt) out += "<|start|>assistant";
}

// What the template raises on (CheckToolUse checks the call count).
Status ChatTemplate::CheckHarmony(std::span<const ChatMessage> messages) const {
  bool after_call = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "'messages[" + std::to_string(i) + "]";
    if (m.role == "assistant" &&
        (HasChannelTag(m.content) || HasChannelTag(m.reasoning.value_or("")))) {
      return Status::InvalidArgument(
          where + (HasChannelTag(m.content) ? ".content'" : ".reasoning_content'") +
          " holds a <|channel|> tag; gpt-oss's template takes the analysis in "
          "'reasoning_content' and the answer in 'content', without tags");
    }
    if (m.role == "assistant" && !m.tool_calls.empty() && !m.content.empty() &&
        !m.reasoning.value_or("").empty()) {
      return Status::InvalidArgument(
          where +
          "' has tool_calls with both 'content' and 'reasoning_content'; gpt-oss's "
          "template takes the analysis of a call's turn in one of them");
    }
    if (m.role == "tool" && !after_call) {
      return Status::InvalidArgument(where +
                                     "' is a tool result with no assistant tool call "
                                     "before it; gpt-oss's template needs the call");
    }
    if (m.role == "assistant") after_call = !m.tool_calls.empty();
  }
  return Status::Ok();
}

}  // namespace kvserve
