#include "server/anthropic_messages.h"

#include "server/translated_request.h"

#include <algorithm>
#include <string_view>

namespace kvserve {

using nlohmann::json;

namespace {

// A string, or an array of {"type": "text", "text": ...} blocks (joined by newlines).
std::optional<ApiError> ReadText(const json& value, const std::string& field, std::string& out) {
  if (value.is_string()) {
    out = value.get<std::string>();
    return std::nullopt;
  }
  if (!value.is_array()) return WrongField(field, "a string or an array of text blocks", value);
  for (size_t i = 0; i < value.size(); ++i) {
    const json& block = value[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!block.is_object() || block.value("type", json()) != "text") {
      return WrongField(where, "a text block ({\"type\": \"text\", \"text\": ...})", block);
    }
    const json* text = FindField(block, "text");
    if (text == nullptr || !text->is_string()) {
      return WrongField(where + ".text", "a string", text ? *text : json());
    }
    if (!out.empty()) out += "\n";
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// A tool_result block -> an OpenAI "tool" message.
std::optional<ApiError> ToolResult(const json& block, const std::string& where, json& out) {
  const json* id = FindField(block, "tool_use_id");
  if (id == nullptr || !id->is_string()) {
    return WrongField(where + ".tool_use_id", "a string", id ? *id : json());
  }
  std::string text;
  if (const json* content = FindField(block, "content")) {
    if (auto error = ReadText(*content, where + ".content", text)) return error;
  }
  const json* is_error = FindField(block, "is_error");
  if (is_error != nullptr && !is_error->is_boolean()) {
    return WrongField(where + ".is_error", "true or false", *is_error);
  }
  if (is_error != nullptr && is_error->get<bool>()) text = "Error: " + text;
  out = {{"role", "tool"}, {"tool_call_id", *id}, {"content", text}};
  return std::nullopt;
}

// A tool_use block -> an OpenAI tool call.
std::optional<ApiError> ToolUse(const json& block, const std::string& where, json& out) {
  const json* id = FindField(block, "id");
  const json* name = FindField(block, "name");
  const json* input = FindField(block, "input");
  if (id == nullptr || !id->is_string())
    return WrongField(where + ".id", "a string", id ? *id : json());
  if (name == nullptr || !name->is_string()) {
    return WrongField(where + ".name", "a string", name ? *name : json());
  }
  if (input != nullptr && !input->is_object())
    return WrongField(where + ".input", "an object", *input);
  out = {{"id", *id},
         {"type", "function"},
         {"function", {{"name", *name}, {"arguments", DumpJson(input ? *input : json::object())}}}};
  return std::nullopt;
}

// One Anthropic message -> OpenAI messages appended to `out`: a user turn's tool results come
// first as "tool" messages, then its text; an assistant turn's tool_use blocks are its tool_calls.
std::optional<ApiError> Message(const json& message, size_t index, json& out) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!message.is_object()) return WrongField(where, "an object", message);
  const json role = message.value("role", json());
  if (role != "user" && role != "assistant") {
    return WrongField(where + ".role", "\"user\" or \"assistant\"", role);
  }
  const json* content = FindField(message, "content");
  if (content == nullptr)
    return WrongField(where + ".content", "a string or an array of blocks", {});
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", *content}});
    return std::nullopt;
  }
  if (!content->is_array()) {
    return WrongField(where + ".content", "a string or an array of blocks", *content);
  }
  std::string text;
  json calls = json::array();
  for (size_t i = 0; i < content->size(); ++i) {
    const json& block = (*content)[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!block.is_object()) return WrongField(at, "a content block object", block);
    const json type = block.value("type", json());
    if (type == "text") {
      const json* piece = FindField(block, "text");
      if (piece == nullptr || !piece->is_string()) {
        return WrongField(at + ".text", "a string", piece ? *piece : json());
      }
      if (!text.empty()) text += "\n";
      text += piece->get<std::string>();
    } else if (type == "tool_result" && role == "user") {
      json tool;
      if (auto error = ToolResult(block, at, tool)) return error;
      out.push_back(std::move(tool));
    } else if (type == "tool_use" && role == "assistant") {
      json call;
      if (auto error = ToolUse(block, at, call)) return error;
      calls.push_back(std::move(call));
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      continue;  // earlier reasoning is not rendered again, as chat templates drop it
    } else {
      return WrongField(at + ".type",
                        role == "user"
                            ? "\"text\" or \"tool_result\" in a user turn"
                            : "\"text\", \"tool_use\" or \"thinking\" in an assistant turn",
                        type);
    }
  }
  if (role == "assistant") {
    json turn = {{"role", "assistant"},
                 {"content", text.empty() && !calls.empty() ? json() : json(text)}};
    if (!calls.empty()) turn["tool_calls"] = std::move(calls);
    out.push_back(std::move(turn));
  } else if (!text.empty() || out.empty() || out.back().value("role", "") != "tool") {
    out.push_back({{"role", "user"}, {"content", text}});
  }
  return std::nullopt;
}

std::optional<ApiError> Messages(const json& body, json& chat) {
  json messages = json::array();
  if (const json* system = FindField(body, "system")) {
    std::string text;
    if (auto error = ReadText(*system, "system", text)) return error;
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  const json* list = FindField(body, "messages");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return WrongField("messages", "a non-empty array of messages", list ? *list : json());
  }
  for (size_t i = 0; i < list->size(); ++i) {
    if (auto error = Message((*list)[i], i, messages)) return error;
  }
  chat["messages"] = std::move(messages);
  return std::nullopt;
}

std::optional<ApiError> Tools(const json& body, json& chat) {
  const json* tools = FindField(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return WrongField("tools", "an array of tools", *tools);
  json out = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& tool = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return WrongField(where, "an object", tool);
    const json* name = FindField(tool, "name");
    const json* schema = FindField(tool, "input_schema");
    const json* description = FindField(tool, "description");
    if (name == nullptr || !name->is_string()) {
      return WrongField(where + ".name", "a string", name ? *name : json());
    }
    if (schema == nullptr || !schema->is_object()) {
      return WrongField(where + ".input_schema", "a JSON schema object", schema ? *schema : json());
    }
    json function = {{"name", *name}, {"parameters", *schema}};
    if (description != nullptr) {
      if (!description->is_string())
        return WrongField(where + ".description", "a string", *description);
      function["description"] = *description;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  chat["tools"] = std::move(out);
  return std::nullopt;
}

std::optional<ApiError> ToolChoice(const json& body, json& chat) {
  const json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (!choice->is_object()) return WrongField("tool_choice", "an object with a \"type\"", *choice);
  const json type = choice->value("type", json());
  if (type == "auto" || type == "none") {
    chat["tool_choice"] = type;
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "tool") {
    const json* name = FindField(*choice, "name");
    if (name == nullptr || !name->is_string()) {
      return WrongField("tool_choice.name", "a string", name ? *name : json());
    }
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return WrongField("tool_choice.type", "\"auto\", \"any\", \"tool\" or \"none\"", type);
  }
  if (const json* serial = FindField(*choice, "disable_parallel_tool_use")) {
    if (!serial->is_boolean()) {
      return WrongField("tool_choice.disable_parallel_tool_use", "true or false", *serial);
    }
    chat["parallel_tool_calls"] = !serial->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> Thinking(const json& body, json& chat) {
  const json* thinking = FindField(body, "thinking");
  if (thinking == nullptr) return std::nullopt;
  if (!thinking->is_object()) return WrongField("thinking", "an object with a \"type\"", *thinking);
  const json type = thinking->value("type", json());
  if (type == "disabled") return std::nullopt;
  if (type != "enabled") return WrongField("thinking.type", "\"enabled\" or \"disabled\"", type);
  const json* budget = FindField(*thinking, "budget_tokens");
  if (budget == nullptr || !budget->is_number_integer() || budget->get<int64_t>() < 1 ||
      budget->get<int64_t>() > (int64_t{1} << 30)) {
    return WrongField("thinking.budget_tokens", "a positive integer", budget ? *budget : json());
  }
  chat["reasoning_format"] = "deepseek";
  chat["reasoning_budget_tokens"] = *budget;
  return std::nullopt;
}

// The scalar fields: checked for presence and type here, for range by the chat parser.
std::optional<ApiError> Scalars(const json& body, json& chat) {
  if (auto error = ReadModelAndStream(body, chat)) return error;
  const json* max_tokens = FindField(body, "max_tokens");
  if (max_tokens == nullptr || !max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1) {
    return WrongField("max_tokens", "a positive integer (it is required)",
                      max_tokens ? *max_tokens : json());
  }
  chat["max_tokens"] = *max_tokens;
  for (const char* name : {"temperature", "top_p", "top_k"}) {
    const json* value = FindField(body, name);
    if (value == nullptr) continue;
    if (!value->is_number()) return WrongField(name, "a number", *value);
    chat[name] = *value;
  }
  if (const json* stops = FindField(body, "stop_sequences")) {
    if (!stops->is_array()) return WrongField("stop_sequences", "an array of strings", *stops);
    for (size_t i = 0; i < stops->size(); ++i) {
      const json& stop = (*stops)[i];
      if (!stop.is_string() || stop.get<std::string>().empty()) {
        return WrongField("stop_sequences[" + std::to_string(i) + "]", "a non-empty string", stop);
      }
    }
    if (!stops->empty()) chat["stop"] = *stops;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> AnthropicToChat(const json& body, json& chat) {
  if (!body.is_object()) return WrongField("body", "a JSON object", body);
  chat = json::object();
  if (auto error = Scalars(body, chat)) return error;
  if (auto error = Messages(body, chat)) return error;
  if (auto error = Tools(body, chat)) return error;
  if (auto error = ToolChoice(body, chat)) return error;
  return Thinking(body, chat);
}

std::string AnthropicStopReason(const std::string& finish_reason, const std::string& stop_string,
                                const json& stop_sequences) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  const bool asked =
      stop_sequences.is_array() &&
      std::find(stop_sequences.begin(), stop_sequences.end(), stop_string) != stop_sequences.end();
  return !stop_string.empty() && asked ? "stop_sequence" : "end_turn";
}

json AnthropicUsageJson(const json& usage) {
  const int prompt = usage.value("prompt_tokens", 0);
  int cached = 0;
  if (auto details = usage.find("prompt_tokens_details");
      details != usage.end() && details->is_object()) {
    cached = details->value("cached_tokens", 0);
  }
  return {{"input_tokens", prompt - cached},
          {"output_tokens", usage.value("completion_tokens", 0)},
          {"cache_read_input_tokens", cached},
          {"cache_creation_input_tokens", 0}};
}

std::string AnthropicId(const std::string& openai_id, const std::string& prefix) {
  const size_t dash = openai_id.find_first_of("-_");
  return prefix + (dash == std::string::npos ? openai_id : openai_id.substr(dash + 1));
}

json AnthropicMessageJson(const json& chat_completion, const json& stop_sequences) {
  json content = json::array();
  std::string finish_reason = "stop", stop_string;
  const json& choices = chat_completion.at("choices");
  if (!choices.empty()) {
    const json& choice = choices.at(0);
    const json& message = choice.at("message");
    finish_reason = choice.value("finish_reason", "stop");
    stop_string = choice.value("stop_reason", "");
    if (auto reasoning = message.find("reasoning_content");
        reasoning != message.end() && reasoning->is_string() && !reasoning->empty()) {
      content.push_back({{"type", "thinking"}, {"thinking", *reasoning}, {"signature", ""}});
    }
    if (auto text = message.find("content");
        text != message.end() && text->is_string() && !text->empty()) {
      content.push_back({{"type", "text"}, {"text", *text}});
    }
    if (auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
      for (const json& call : *calls) {
        const json function = call.value("function", json::object());
        json input = json::parse(function.value("arguments", "{}"), nullptr, false);
        if (!input.is_object()) input = json::object();
        content.push_back({{"type", "tool_use"},
                           {"id", AnthropicId(call.value("id", ""), "toolu_")},
                           {"name", function.value("name", "")},
                           {"input", std::move(input)}});
      }
    }
  }
  const std::string stop_reason = AnthropicStopReason(finish_reason, stop_string, stop_sequences);
  return {{"id", AnthropicId(chat_completion.value("id", ""), "msg_")},
          {"type", "message"},
          {"role", "assistant"},
          {"model", chat_completion.value("model", "")},
          {"content", std::move(content)},
          {"stop_reason", stop_reason},
          {"stop_sequence", stop_reason == "stop_sequence" ? json(stop_string) : json()},
          {"usage", AnthropicUsageJson(chat_completion.value("usage", json::object()))}};
}

namespace {

std::string ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

json AnthropicErrorJson(const ApiError& error) {
  return {{"type", "error"},
          {"error", {{"type", ErrorType(error.http_status)}, {"message", error.message}}}};
}

json AnthropicErrorFromOpenAi(int status, const std::string& body) {
  ApiError error{.http_status = status, .message = "error (status " + std::to_string(status) + ")"};
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object()) {
    if (auto inner = parsed.find("error"); inner != parsed.end() && inner->is_object()) {
      error.message = inner->value("message", error.message);
    }
  }
  return AnthropicErrorJson(error);
}

}  // namespace kvserve
