#include "server/responses_api.h"

#include "server/translated_request.h"

#include <string_view>

namespace kvserve {

using nlohmann::json;

namespace {

constexpr int kMaxTopLogprobs = 20;
constexpr char kLogprobsInclude[] = "message.output_text.logprobs";

// A string, or an array of text parts (input_text, output_text, text; joined by newlines). Images,
// files and audio are refused: the server serves text models.
std::optional<ApiError> ReadText(const json& value, const std::string& field, std::string& out) {
  if (value.is_string()) {
    out = value.get<std::string>();
    return std::nullopt;
  }
  if (!value.is_array()) return WrongField(field, "a string or an array of content parts", value);
  for (size_t i = 0; i < value.size(); ++i) {
    const json& part = value[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return WrongField(where, "a content part object", part);
    const json type = part.value("type", json());
    if (type == "refusal") continue;
    if (type != "input_text" && type != "output_text" && type != "text") {
      return WrongField(where + ".type",
                        "\"input_text\" or \"output_text\" (this server reads text only)", type);
    }
    std::string text;
    if (auto error = ReadStringField(part, where, "text", text)) return error;
    if (!out.empty()) out += "\n";
    out += text;
  }
  return std::nullopt;
}

// Whether the last chat message is an assistant turn that later function_call items may join.
bool OpenAssistantTurn(const json& messages) {
  return !messages.empty() && messages.back().value("role", "") == "assistant";
}

// A message item -> a chat message (developer -> system, as the chat route reads it).
std::optional<ApiError> MessageItem(const json& item, const std::string& where, json& messages) {
  const json role = item.value("role", json());
  if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
    return WrongField(where + ".role", "\"user\", \"assistant\", \"system\" or \"developer\"",
                      role);
  }
  const json* content = FindField(item, "content");
  if (content == nullptr)
    return WrongField(where + ".content", "a string or an array of parts", {});
  std::string text;
  if (auto error = ReadText(*content, where + ".content", text)) return error;
  messages.push_back({{"role", role == "developer" ? json("system") : role}, {"content", text}});
  return std::nullopt;
}

// A function_call item (a call the model made earlier) -> a tool call of an assistant turn: the
// turn before it when that is the assistant's, a new one otherwise.
std::optional<ApiError> FunctionCallItem(const json& item, const std::string& where,
                                         json& messages) {
  std::string call_id, name, arguments;
  if (auto error = ReadStringField(item, where, "call_id", call_id)) return error;
  if (auto error = ReadStringField(item, where, "name", name)) return error;
  if (auto error = ReadStringField(item, where, "arguments", arguments)) return error;
  if (!OpenAssistantTurn(messages)) {
    messages.push_back({{"role", "assistant"}, {"content", nullptr}});
  }
  json& turn = messages.back();
  if (turn["content"].is_string() && turn["content"].get<std::string>().empty()) {
    turn["content"] = nullptr;
  }
  turn["tool_calls"].push_back({{"id", call_id},
                                {"type", "function"},
                                {"function", {{"name", name}, {"arguments", arguments}}}});
  return std::nullopt;
}

// A function_call_output item -> a "tool" message.
std::optional<ApiError> FunctionOutputItem(const json& item, const std::string& where,
                                           json& messages) {
  std::string call_id, output;
  if (auto error = ReadStringField(item, where, "call_id", call_id)) return error;
  const json* value = FindField(item, "output");
  if (value == nullptr) return WrongField(where + ".output", "a string or an array of parts", {});
  if (auto error = ReadText(*value, where + ".output", output)) return error;
  messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
  return std::nullopt;
}

std::optional<ApiError> InputItem(const json& item, size_t index, json& messages) {
  const std::string where = "input[" + std::to_string(index) + "]";
  if (!item.is_object()) return WrongField(where, "an input item object", item);
  const json type = item.value("type", json("message"));
  if (type == "message") return MessageItem(item, where, messages);
  if (type == "function_call") return FunctionCallItem(item, where, messages);
  if (type == "function_call_output") return FunctionOutputItem(item, where, messages);
  if (type == "reasoning") return std::nullopt;  // earlier reasoning is not rendered again
  if (type == "item_reference") {
    return ApiError::BadRequest("'" + where +
                                    ".type' \"item_reference\" needs stored items, and this "
                                    "server keeps none: send the items themselves",
                                where + ".type");
  }
  return WrongField(where + ".type",
                    "\"message\", \"function_call\", \"function_call_output\" or \"reasoning\"",
                    type);
}

// instructions + input -> chat messages; instructions join a leading system message.
std::optional<ApiError> Input(const json& body, json& chat) {
  json messages = json::array();
  const json* input = FindField(body, "input");
  if (input == nullptr) return WrongField("input", "a string or an array of input items", {});
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) {
      if (auto error = InputItem((*input)[i], i, messages)) return error;
    }
  } else {
    return WrongField("input", "a string or a non-empty array of input items", *input);
  }
  if (const json* instructions = FindField(body, "instructions")) {
    if (!instructions->is_string()) return WrongField("instructions", "a string", *instructions);
    std::string system = instructions->get<std::string>();
    if (messages.front().value("role", "") == "system") {
      system += "\n\n" + messages.front().value("content", "");
      messages.erase(messages.begin());
    }
    messages.insert(messages.begin(), json{{"role", "system"}, {"content", system}});
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
    const json type = tool.value("type", json());
    if (type != "function") {
      return WrongField(where + ".type", "\"function\" (the server runs no built-in tools)", type);
    }
    std::string name;
    if (auto error = ReadStringField(tool, where, "name", name)) return error;
    json function = {{"name", name}};
    if (const json* parameters = FindField(tool, "parameters")) {
      if (!parameters->is_object())
        return WrongField(where + ".parameters", "an object", *parameters);
      function["parameters"] = *parameters;
    }
    if (const json* description = FindField(tool, "description")) {
      if (!description->is_string())
        return WrongField(where + ".description", "a string", *description);
      function["description"] = *description;
    }
    if (const json* strict = FindField(tool, "strict")) function["strict"] = *strict;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  chat["tools"] = std::move(out);
  return std::nullopt;
}

std::optional<ApiError> ToolChoice(const json& body, json& chat) {
  const json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode != "auto" && mode != "none" && mode != "required") {
      return WrongField("tool_choice", "\"auto\", \"none\", \"required\" or a function", *choice);
    }
    chat["tool_choice"] = mode;
    return std::nullopt;
  }
  if (!choice->is_object() || choice->value("type", json()) != "function") {
    return WrongField("tool_choice", "\"auto\", \"none\", \"required\" or {\"type\": \"function\"}",
                      *choice);
  }
  std::string name;
  if (auto error = ReadStringField(*choice, "tool_choice", "name", name)) return error;
  chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  return std::nullopt;
}

// text.format -> response_format: json_object, or json_schema with its name, schema and strict
// flag (flat here, nested in the chat form).
std::optional<ApiError> TextFormat(const json& body, json& chat) {
  const json* text = FindField(body, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->is_object()) return WrongField("text", "an object", *text);
  const json* format = FindField(*text, "format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object()) return WrongField("text.format", "an object with a \"type\"", *format);
  const json type = format->value("type", json());
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (type != "json_schema") {
    return WrongField("text.format.type", "\"text\", \"json_object\" or \"json_schema\"", type);
  }
  json schema = {{"name", format->value("name", "response")}};
  for (const char* name : {"schema", "strict", "description"}) {
    if (const json* value = FindField(*format, name)) schema[name] = *value;
  }
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  return std::nullopt;
}

// Fields that need stored state, which a stateless server does not keep.
std::optional<ApiError> Stateless(const json& body) {
  for (const char* name : {"previous_response_id", "conversation"}) {
    if (FindField(body, name) != nullptr) {
      return ApiError::BadRequest(std::string("'") + name +
                                      "' needs stored responses, and this server keeps none "
                                      "(stateless /v1/responses): send the whole conversation "
                                      "in 'input'",
                                  name);
    }
  }
  if (const json* background = FindField(body, "background");
      background != nullptr && *background != false) {
    return ApiError::BadRequest(
        "'background' must be false: this server answers while the connection is open",
        "background");
  }
  return std::nullopt;
}

// top_logprobs and include ["message.output_text.logprobs"] -> the chat route's logprobs.
std::optional<ApiError> Logprobs(const json& body, json& chat) {
  bool wanted = false;
  if (const json* include = FindField(body, "include")) {
    if (!include->is_array()) return WrongField("include", "an array of strings", *include);
    for (const json& entry : *include) wanted |= entry == kLogprobsInclude;
  }
  if (const json* top = FindField(body, "top_logprobs")) {
    if (!top->is_number_integer() || top->get<int64_t>() < 0 ||
        top->get<int64_t>() > kMaxTopLogprobs) {
      return WrongField("top_logprobs", "an integer from 0 to 20", *top);
    }
    chat["top_logprobs"] = *top;
    wanted = true;
  }
  if (wanted) chat["logprobs"] = true;
  return std::nullopt;
}

// The scalar fields: checked for presence and type here, for range by the chat parser.
std::optional<ApiError> Scalars(const json& body, json& chat) {
  if (auto error = ReadModelAndStream(body, chat)) return error;
  if (const json* max_tokens = FindField(body, "max_output_tokens")) {
    if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1) {
      return WrongField("max_output_tokens", "a positive integer", *max_tokens);
    }
    chat["max_tokens"] = *max_tokens;
  }
  if (const json* parallel = FindField(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean())
      return WrongField("parallel_tool_calls", "true or false", *parallel);
    chat["parallel_tool_calls"] = *parallel;
  }
  // "reasoning": {"effort": ...} is the chat route's reasoning_effort (gpt-oss's prompt states
  // it); "summary" is accepted and unused (the reasoning comes back whole).
  if (const json* reasoning = FindField(body, "reasoning")) {
    if (!reasoning->is_object()) return WrongField("reasoning", "an object", *reasoning);
    if (auto effort = reasoning->find("effort"); effort != reasoning->end() && !effort->is_null()) {
      if (!effort->is_string() || (*effort != "low" && *effort != "medium" && *effort != "high")) {
        return WrongField("reasoning.effort", "\"low\", \"medium\" or \"high\"", *effort);
      }
      chat["reasoning_effort"] = *effort;
    }
  }
  // OpenAI's sampling fields and the extensions the chat route reads, passed through unchanged.
  for (const char* name : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
                           "frequency_penalty", "repetition_penalty", "stop", "user", "session_id",
                           "cache_salt", "speculative", "reasoning_format", "logit_bias"}) {
    if (const json* value = FindField(body, name)) chat[name] = *value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ResponsesToChat(const json& body, json& chat) {
  if (!body.is_object()) return WrongField("body", "a JSON object", body);
  chat = json::object();
  if (auto error = Stateless(body)) return error;
  if (auto error = Scalars(body, chat)) return error;
  if (auto error = Input(body, chat)) return error;
  if (auto error = Tools(body, chat)) return error;
  if (auto error = ToolChoice(body, chat)) return error;
  if (auto error = TextFormat(body, chat)) return error;
  return Logprobs(body, chat);
}

json ResponseShell(const json& body) {
  auto echo = [&](const char* name, json fallback) {
    const json* value = FindField(body, name);
    return value ? *value : fallback;
  };
  json text = echo("text", json::object());
  if (!text.is_object()) text = json::object();
  if (!text.contains("format")) text["format"] = {{"type", "text"}};
  return {{"object", "response"},
          {"error", nullptr},
          {"incomplete_details", nullptr},
          {"instructions", echo("instructions", nullptr)},
          {"max_output_tokens", echo("max_output_tokens", nullptr)},
          {"metadata", echo("metadata", json::object())},
          {"parallel_tool_calls", echo("parallel_tool_calls", true)},
          {"previous_response_id", nullptr},
          {"reasoning", echo("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
          {"store", false},
          {"temperature", echo("temperature", 1.0)},
          {"text", std::move(text)},
          {"tool_choice", echo("tool_choice", "auto")},
          {"tools", echo("tools", json::array())},
          {"top_logprobs", echo("top_logprobs", 0)},
          {"top_p", echo("top_p", 1.0)},
          {"truncation", "disabled"},
          {"background", false},
          {"output", json::array()},
          {"usage", nullptr}};
}

std::string ResponseItemId(const std::string& chat_id, const std::string& prefix) {
  const size_t dash = chat_id.find_first_of("-_");
  return prefix + (dash == std::string::npos ? chat_id : chat_id.substr(dash + 1));
}

void SetResponseStatus(const std::string& finish_reason, json& response) {
  response["incomplete_details"] = nullptr;
  response["error"] = nullptr;
  if (finish_reason == "length") {
    response["status"] = "incomplete";
    response["incomplete_details"] = {{"reason", "max_output_tokens"}};
  } else if (finish_reason == "abort" || finish_reason == "timeout") {
    response["status"] = "failed";
    response["error"] = {
        {"code", "server_error"},
        {"message", finish_reason == "timeout" ? "the request ran past the server's request timeout"
                                               : "the request was aborted by the server"}};
  } else {
    response["status"] = "completed";
  }
}

json ResponseUsageJson(const json& usage) {
  auto count = [&](const json& object, const char* name) {
    auto it = object.find(name);
    return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
  };
  const json empty = json::object();
  auto details = [&](const char* name) -> const json& {
    auto it = usage.find(name);
    return it != usage.end() && it->is_object() ? *it : empty;
  };
  const int64_t input = count(usage, "prompt_tokens");
  const int64_t output = count(usage, "completion_tokens");
  return {{"input_tokens", input},
          {"input_tokens_details",
           {{"cached_tokens", count(details("prompt_tokens_details"), "cached_tokens")},
            {"cache_write_tokens", 0}}},
          {"output_tokens", output},
          {"output_tokens_details",
           {{"reasoning_tokens", count(details("completion_tokens_details"), "reasoning_tokens")}}},
          {"total_tokens", input + output}};
}

json ResponseLogprobsJson(const json& chat_logprobs) {
  json out = json::array();
  if (!chat_logprobs.is_object()) return out;
  auto content = chat_logprobs.find("content");
  if (content == chat_logprobs.end() || !content->is_array()) return out;
  for (const json& entry : *content) {
    json top = json::array();
    for (const json& alternative : entry.value("top_logprobs", json::array())) {
      top.push_back({{"token", alternative.value("token", "")},
                     {"logprob", alternative.value("logprob", 0.0)},
                     {"bytes", alternative.value("bytes", json::array())}});
    }
    out.push_back({{"token", entry.value("token", "")},
                   {"logprob", entry.value("logprob", 0.0)},
                   {"bytes", entry.value("bytes", json::array())},
                   {"top_logprobs", std::move(top)}});
  }
  return out;
}

namespace {

// The output items of a chat choice's message: reasoning, then the answer, then the calls; the
// last one is "incomplete" when max_tokens cut the choice (as the stream closes it).
json OutputItems(const std::string& chat_id, const json& choice) {
  json items = json::array();
  const std::string status = "completed";
  const json message = choice.value("message", json::object());
  const json reasoning = message.value("reasoning_content", json());
  if (reasoning.is_string() && !reasoning.get<std::string>().empty()) {
    items.push_back(ReasoningItemJson(ResponseItemId(chat_id, "rs_"), status, reasoning));
  }
  const json content = message.value("content", json());
  const json calls = message.value("tool_calls", json::array());
  if ((content.is_string() && !content.get<std::string>().empty()) || calls.empty()) {
    items.push_back(MessageItemJson(ResponseItemId(chat_id, "msg_"), status,
                                    content.is_string() ? content.get<std::string>() : "",
                                    ResponseLogprobsJson(choice.value("logprobs", json()))));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const json function = calls[i].value("function", json::object());
    items.push_back(FunctionCallItemJson(
        ResponseItemId(chat_id, "fc_") + "_" + std::to_string(i), status, calls[i].value("id", ""),
        function.value("name", ""), function.value("arguments", "{}")));
  }
  if (choice.value("finish_reason", "stop") == "length") items.back()["status"] = "incomplete";
  return items;
}

}  // namespace

json ResponseJson(const json& chat_completion, json shell) {
  const std::string chat_id = chat_completion.value("id", "");
  const json choices = chat_completion.value("choices", json::array());
  const json choice = choices.empty() ? json::object() : choices.at(0);
  shell["id"] = ResponseItemId(chat_id, "resp_");
  shell["created_at"] = chat_completion.value("created", 0);
  shell["model"] = chat_completion.value("model", "");
  shell["output"] = OutputItems(chat_id, choice);
  shell["usage"] = ResponseUsageJson(chat_completion.value("usage", json::object()));
  SetResponseStatus(choice.value("finish_reason", "stop"), shell);
  return shell;
}

json MessageItemJson(const std::string& id, const std::string& status, const std::string& text,
                     json logprobs) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"},
                                    {"text", text},
                                    {"annotations", json::array()},
                                    {"logprobs", std::move(logprobs)}}})}};
}

json ReasoningItemJson(const std::string& id, const std::string& status, const std::string& text) {
  return {{"type", "reasoning"},
          {"id", id},
          {"status", status},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json FunctionCallItemJson(const std::string& id, const std::string& status,
                          const std::string& call_id, const std::string& name,
                          const std::string& arguments) {
  return {{"type", "function_call"}, {"id", id},        {"call_id", call_id}, {"name", name},
          {"arguments", arguments},  {"status", status}};
}

}  // namespace kvserve
