#include "server/completion_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

namespace kvserve {

namespace {

using nlohmann::json;

constexpr int64_t kMaxTokensLimit = 1 << 24;  // max_tokens, pinned_prefix_tokens

std::string Shown(const json& value) {
  std::string text = DumpJson(value);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

ApiError WrongType(std::string_view name, std::string_view expected, const json& value) {
  return ApiError::BadRequest(
      "'" + std::string(name) + "' must be " + std::string(expected) + ", got " + Shown(value),
      std::string(name));
}

// A present, non-null field.
const json* Field(const json& body, std::string_view name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> ReadDouble(const json& body, std::string_view name, double lo, double hi,
                                   bool lo_open, double& out) {
  const json* value = Field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) return WrongType(name, "a number", *value);
  const double x = value->get<double>();
  const bool below = lo_open ? !(x > lo) : !(x >= lo);
  if (below || !(x <= hi) || !std::isfinite(x)) {
    return ApiError::BadRequest("'" + std::string(name) + "' must be in " + (lo_open ? "(" : "[") +
                                    Shown(lo) + ", " + Shown(hi) + "], got " + Shown(*value),
                                std::string(name));
  }
  out = x;
  return std::nullopt;
}

std::optional<ApiError> ReadFloat(const json& body, std::string_view name, double lo, double hi,
                                  bool lo_open, float& out) {
  double x = out;
  if (auto error = ReadDouble(body, name, lo, hi, lo_open, x)) return error;
  out = static_cast<float>(x);
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const json& body, std::string_view name, int64_t lo, int64_t hi,
                                std::optional<int64_t>& out) {
  const json* value = Field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number_integer()) return WrongType(name, "an integer", *value);
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return ApiError::BadRequest("'" + std::string(name) + "' must be at most " +
                                    std::to_string(hi) + ", got " + Shown(*value),
                                std::string(name));
  }
  const int64_t x = value->get<int64_t>();
  if (x < lo || x > hi) {
    return ApiError::BadRequest("'" + std::string(name) + "' must be in [" + std::to_string(lo) +
                                    ", " + std::to_string(hi) + "], got " + Shown(*value),
                                std::string(name));
  }
  out = x;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const json& body, std::string_view name, bool& out) {
  const json* value = Field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) return WrongType(name, "true or false", *value);
  out = value->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadString(const json& body, std::string_view name, size_t max_bytes,
                                   std::string& out) {
  const json* value = Field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_string()) return WrongType(name, "a string", *value);
  out = value->get<std::string>();
  if (out.size() > max_bytes) {
    return ApiError::BadRequest("'" + std::string(name) + "' is " + std::to_string(out.size()) +
                                    " bytes long; the limit is " + std::to_string(max_bytes),
                                std::string(name));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTokenArray(const json& array, int n_vocab, const std::string& name,
                                       std::vector<int32_t>& out) {
  out.clear();
  out.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const json& item = array[i];
    const std::string where = name + "[" + std::to_string(i) + "]";
    if (!item.is_number_integer()) return WrongType(where, "a token id (integer)", item);
    const int64_t id = item.is_number_unsigned() && item.get<uint64_t>() > INT32_MAX
                           ? int64_t{INT32_MAX} + 1
                           : item.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return ApiError::BadRequest("'" + where + "' is token id " + Shown(item) +
                                      ", outside the vocabulary [0, " + std::to_string(n_vocab) +
                                      ")",
                                  "prompt");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadPrompts(const json& body, int n_vocab, std::vector<PromptInput>& out) {
  const json* prompt = Field(body, "prompt");
  if (!prompt) return ApiError::BadRequest("'prompt' is required", "prompt");
  if (prompt->is_string()) {
    out.push_back(PromptInput{.text = prompt->get<std::string>()});
    return std::nullopt;
  }
  const char* kExpected =
      "a string, an array of token ids, or an array of strings or of token "
      "id arrays";
  if (!prompt->is_array()) return WrongType("prompt", kExpected, *prompt);
  if (prompt->empty()) return ApiError::BadRequest("'prompt' is an empty array", "prompt");
  if ((*prompt)[0].is_number()) {
    PromptInput input{.is_tokens = true};
    if (auto error = ReadTokenArray(*prompt, n_vocab, "prompt", input.tokens)) return error;
    out.push_back(std::move(input));
    return std::nullopt;
  }
  if (prompt->size() > static_cast<size_t>(kMaxPrompts)) {
    return ApiError::BadRequest("'prompt' holds " + std::to_string(prompt->size()) +
                                    " prompts; the limit is " + std::to_string(kMaxPrompts),
                                "prompt");
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const json& item = (*prompt)[i];
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (item.is_string()) {
      out.push_back(PromptInput{.text = item.get<std::string>()});
    } else if (item.is_array()) {
      if (item.empty()) return ApiError::BadRequest("'" + where + "' is an empty array", "prompt");
      PromptInput input{.is_tokens = true};
      if (auto error = ReadTokenArray(item, n_vocab, where, input.tokens)) return error;
      out.push_back(std::move(input));
    } else {
      return WrongType(where, "a string or an array of token ids", item);
    }
  }
  return std::nullopt;
}

// "content" is a string or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> ReadContent(const json& content, const std::string& where,
                                    std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (content.is_null()) return std::nullopt;  // an assistant turn that only called tools
  if (!content.is_array()) return WrongType(where, "a string or an array of text parts", content);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_where = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return WrongType(part_where, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || *type != "text") {
      return ApiError::BadRequest("'" + part_where + ".type' must be \"text\" (only text parts " +
                                      "are supported), got " +
                                      (type == part.end() ? std::string("nothing") : Shown(*type)),
                                  "messages");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      return WrongType(part_where + ".text", "a string",
                       text == part.end() ? json(nullptr) : *text);
    }
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments": JSON text or an object}}].
std::optional<ApiError> ReadToolCalls(const json& calls, const std::string& where,
                                      std::vector<ChatToolCall>& out) {
  if (!calls.is_array()) return WrongType(where, "an array of tool calls", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return WrongType(at, "an object", call);
    ChatToolCall parsed;
    if (auto e = ReadString(call, "id", kMaxIdBytes, parsed.id)) {
      return WrongType(at + ".id", "a string of at most 256 bytes", call.at("id"));
    }
    auto function = call.find("function");
    if (function == call.end() || !function->is_object()) {
      return WrongType(at + ".function", "an object with name and arguments",
                       function == call.end() ? json(nullptr) : *function);
    }
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() ||
        name->get_ref<const std::string&>().empty()) {
      return WrongType(at + ".function.name", "a non-empty string",
                       name == function->end() ? json(nullptr) : *name);
    }
    parsed.name = name->get<std::string>();
    auto arguments = function->find("arguments");
    if (arguments != function->end() && arguments->is_string()) {
      parsed.arguments = arguments->get<std::string>();
    } else if (arguments != function->end() && arguments->is_object()) {
      parsed.arguments = DumpJson(*arguments);
    } else if (arguments == function->end() || arguments->is_null()) {
      parsed.arguments = "{}";
    } else {
      return WrongType(at + ".function.arguments", "a string of JSON or an object", *arguments);
    }
    out.push_back(std::move(parsed));
  }
  return std::nullopt;
}

// One message: its role, its content, and the tool fields of assistant and tool turns.
std::optional<ApiError> ReadMessage(const json& message, const std::string& where,
                                    ChatMessage& chat) {
  if (!message.is_object()) return WrongType(where, "an object", message);
  auto role = message.find("role");
  if (role == message.end() || !role->is_string()) {
    return WrongType(where + ".role", "a string", role == message.end() ? json(nullptr) : *role);
  }
  chat.role = role->get<std::string>();
  if (chat.role == "developer") chat.role = "system";  // OpenAI's newer name for it
  if (chat.role != "system" && chat.role != "user" && chat.role != "assistant" &&
      chat.role != "tool") {
    return ApiError::BadRequest("'" + where + ".role' must be one of system, developer, user, " +
                                    "assistant, tool, got " + Shown(*role),
                                "messages");
  }
  const json* calls = chat.role == "assistant" ? Field(message, "tool_calls") : nullptr;
  if (calls) {
    if (auto e = ReadToolCalls(*calls, where + ".tool_calls", chat.tool_calls)) return e;
  }
  auto content = message.find("content");
  if (content == message.end() && chat.tool_calls.empty()) {
    return ApiError::BadRequest("'" + where + ".content' is required", "messages");
  }
  if (content != message.end()) {
    if (auto error = ReadContent(*content, where + ".content", chat.content)) return error;
  }
  if (const json* reasoning =
          chat.role == "assistant" ? Field(message, "reasoning_content") : nullptr) {
    if (!reasoning->is_string()) {
      return WrongType(where + ".reasoning_content", "a string", *reasoning);
    }
    chat.reasoning = reasoning->get<std::string>();
  }
  if (chat.role == "tool") {
    if (auto e = ReadString(message, "tool_call_id", kMaxIdBytes, chat.tool_call_id)) {
      e->message = "'" + where + ".tool_call_id' must be a string of at most " +
                   std::to_string(kMaxIdBytes) + " bytes";
      e->param = "messages";
      return e;
    }
    if (auto e = ReadString(message, "name", kMaxIdBytes, chat.name)) {
      e->message = "'" + where + ".name' must be a string";
      e->param = "messages";
      return e;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const json& body, std::vector<ChatMessage>& out) {
  const json* messages = Field(body, "messages");
  if (!messages) return ApiError::BadRequest("'messages' is required", "messages");
  if (!messages->is_array()) return WrongType("messages", "an array of messages", *messages);
  if (messages->empty()) return ApiError::BadRequest("'messages' is an empty array", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    ChatMessage chat;
    if (auto error = ReadMessage((*messages)[i], "messages[" + std::to_string(i) + "]", chat)) {
      return error;
    }
    out.push_back(std::move(chat));
  }
  return std::nullopt;
}

// OpenAI's function names: 1 to 64 of a-z, A-Z, 0-9, _ and -.
bool ValidFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::optional<ApiError> ReadTool(const json& tool, const std::string& where, ChatTool& out) {
  if (!tool.is_object()) return WrongType(where, "an object", tool);
  auto type = tool.find("type");
  if (type == tool.end() || *type != "function") {
    return ApiError::BadRequest("'" + where + ".type' must be \"function\", got " +
                                    (type == tool.end() ? std::string("nothing") : Shown(*type)),
                                "tools");
  }
  auto function = tool.find("function");
  if (function == tool.end() || !function->is_object()) {
    return WrongType(where + ".function", "an object",
                     function == tool.end() ? json(nullptr) : *function);
  }
  auto name = function->find("name");
  if (name == function->end() || !name->is_string() ||
      !ValidFunctionName(name->get<std::string>())) {
    return ApiError::BadRequest(
        "'" + where + ".function.name' must be 1 to 64 letters, digits, " + "_ or -, got " +
            (name == function->end() ? std::string("nothing") : Shown(*name)),
        "tools");
  }
  if (auto d = function->find("description"); d != function->end() && !d->is_string()) {
    return WrongType(where + ".function.description", "a string", *d);
  }
  if (auto p = function->find("parameters"); p != function->end() && !p->is_object()) {
    return WrongType(where + ".function.parameters", "a JSON Schema object", *p);
  }
  out = ChatTool{.name = name->get<std::string>(), .json = DumpJson(tool)};
  return std::nullopt;
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name": ...}},
// the name one of `tools`; and the grammar hook it implies.
std::optional<ApiError> ReadToolChoice(const json& body, CompletionRequest& out) {
  const json* choice = Field(body, "tool_choice");
  if (!choice) return std::nullopt;
  const char* kExpected =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
      "{\"name\": ...}}";
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "auto") {
      out.tool_choice = ToolChoice::kAuto;
    } else if (mode == "none") {
      out.tool_choice = ToolChoice::kNone;
    } else if (mode == "required") {
      out.tool_choice = ToolChoice::kRequired;
    } else {
      return WrongType("tool_choice", kExpected, *choice);
    }
  } else if (choice->is_object() && choice->value("type", json()) == "function" &&
             choice->contains("function") && (*choice)["function"].is_object() &&
             (*choice)["function"].value("name", json()).is_string()) {
    out.tool_choice = ToolChoice::kFunction;
    out.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
  } else {
    return WrongType("tool_choice", kExpected, *choice);
  }
  if (out.tool_choice == ToolChoice::kRequired || out.tool_choice == ToolChoice::kFunction) {
    if (out.tools.empty()) {
      return ApiError::BadRequest("'tool_choice' " + Shown(*choice) + " needs 'tools'",
                                  "tool_choice");
    }
  }
  if (out.tool_choice == ToolChoice::kRequired) {
    for (const ChatTool& tool : out.tools) out.forced_tools.push_back(tool.name);
  }
  if (out.tool_choice == ToolChoice::kFunction) {
    const bool known = std::any_of(out.tools.begin(), out.tools.end(), [&](const ChatTool& t) {
      return t.name == out.tool_choice_name;
    });
    if (!known) {
      return ApiError::BadRequest("'tool_choice' names the function '" +
                                      out.tool_choice_name.substr(0, 64) +
                                      "', which is not one of 'tools'",
                                  "tool_choice");
    }
    out.forced_tools.push_back(out.tool_choice_name);
  }
  return std::nullopt;
}

// Chat only: tools, tool_choice, parallel_tool_calls, reasoning_format and the reasoning fields,
// chat_template_kwargs.
std::optional<ApiError> ReadChatOptions(const json& body, CompletionRequest& out) {
  if (auto e = ParseChatTools(body, out.tools)) return e;
  if (auto e = ReadToolChoice(body, out)) return e;
  if (auto e = ReadBool(body, "parallel_tool_calls", out.parallel_tool_calls)) return e;
  if (const json* format = Field(body, "reasoning_format")) {
    const auto named =
        format->is_string() ? ReasoningFormatNamed(format->get<std::string>()) : std::nullopt;
    if (!named) {
      return ApiError::BadRequest(
          "'reasoning_format' must be \"none\" or \"deepseek\", got " + Shown(*format),
          "reasoning_format");
    }
    out.reasoning_format = *named;
  }
  std::optional<int64_t> budget;
  if (auto e = ReadInt(body, "reasoning_budget_tokens", -1, kMaxTokensLimit, budget)) return e;
  if (budget == 0) {
    return ApiError::BadRequest("'reasoning_budget_tokens' must be -1 (none) or at least 1, got 0",
                                "reasoning_budget_tokens");
  }
  if (budget) out.reasoning_budget = static_cast<int>(*budget);
  if (auto e = ParseChatTemplateKwargs(body, out.enable_thinking)) return e;
  return ParseReasoningEffort(body, out.reasoning_effort);
}

std::optional<ApiError> ReadStop(const json& body, std::vector<std::string>& out) {
  const json* stop = Field(body, "stop");
  if (!stop) return std::nullopt;
  auto add = [&](const json& item, const std::string& where) -> std::optional<ApiError> {
    if (!item.is_string()) return WrongType(where, "a string", item);
    std::string text = item.get<std::string>();
    if (text.empty()) return ApiError::BadRequest("'" + where + "' is an empty string", "stop");
    if (text.size() > 1024) {
      return ApiError::BadRequest("'" + where + "' is longer than 1024 bytes", "stop");
    }
    out.push_back(std::move(text));
    return std::nullopt;
  };
  if (stop->is_string()) return add(*stop, "stop");
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings", *stop);
  if (stop->size() > static_cast<size_t>(kMaxStopStrings)) {
    return ApiError::BadRequest("'stop' holds " + std::to_string(stop->size()) +
                                    " strings; the limit is " + std::to_string(kMaxStopStrings),
                                "stop");
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    if (auto error = add((*stop)[i], "stop[" + std::to_string(i) + "]")) return error;
  }
  return std::nullopt;
}

std::optional<ApiError> ReadLogitBias(const json& body, int n_vocab,
                                      std::map<int32_t, float>& out) {
  const json* bias = Field(body, "logit_bias");
  if (!bias) return std::nullopt;
  if (!bias->is_object()) return WrongType("logit_bias", "an object of token id -> bias", *bias);
  for (const auto& [key, value] : bias->items()) {
    const std::string where = "logit_bias[\"" + key.substr(0, 40) + "\"]";
    int64_t id = -1;
    bool digits = !key.empty() && key.size() <= 10;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    if (digits) id = std::stoll(key);
    if (!digits || id >= n_vocab) {
      return ApiError::BadRequest(
          "'" + where + "': the key must be a token id in [0, " + std::to_string(n_vocab) + ")",
          "logit_bias");
    }
    if (!value.is_number()) return WrongType(where, "a number", value);
    const double x = value.get<double>();
    if (!(x >= -100.0 && x <= 100.0)) {
      return ApiError::BadRequest("'" + where + "' must be in [-100, 100], got " + Shown(value),
                                  "logit_bias");
    }
    out[static_cast<int32_t>(id)] = static_cast<float>(x);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadLogprobs(const json& body, CompletionKind kind,
                                     CompletionRequest& out) {
  if (kind == CompletionKind::kText) {
    // Completions: logprobs is the number of alternatives (0 = only the chosen token).
    std::optional<int64_t> logprobs;
    if (auto error = ReadInt(body, "logprobs", 0, kMaxTopLogprobs, logprobs)) return error;
    if (logprobs) {
      out.logprobs = true;
      out.sampling.top_logprobs = static_cast<int>(*logprobs);
    }
    return std::nullopt;
  }
  if (auto error = ReadBool(body, "logprobs", out.logprobs)) return error;
  std::optional<int64_t> top;
  if (auto error = ReadInt(body, "top_logprobs", 0, kMaxTopLogprobs, top)) return error;
  if (top && *top > 0 && !out.logprobs) {
    return ApiError::BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }
  if (top) out.sampling.top_logprobs = static_cast<int>(*top);
  return std::nullopt;
}

// temperature, top_p, min_p, the penalties, top_k, seed and logit_bias into out.sampling.
std::optional<ApiError> ReadSampling(const json& body, int n_vocab, CompletionRequest& out) {
  std::optional<int64_t> top_k, seed;
  SamplingParams& s = out.sampling;
  if (auto e = ReadFloat(body, "temperature", 0.0, 2.0, false, s.temperature)) return e;
  if (auto e = ReadFloat(body, "top_p", 0.0, 1.0, true, s.top_p)) return e;
  if (auto e = ReadFloat(body, "min_p", 0.0, 1.0, false, s.min_p)) return e;
  if (auto e = ReadFloat(body, "presence_penalty", -2.0, 2.0, false, s.presence_penalty)) return e;
  if (auto e = ReadFloat(body, "frequency_penalty", -2.0, 2.0, false, s.frequency_penalty)) {
    return e;
  }
  if (auto e = ReadFloat(body, "repetition_penalty", 0.0, 100.0, true, s.repetition_penalty)) {
    return e;
  }
  if (auto e = ReadInt(body, "top_k", -1, n_vocab, top_k)) return e;
  if (top_k) s.top_k = *top_k < 0 ? 0 : static_cast<int>(*top_k);  // -1 = off, as in vLLM
  if (auto e = ReadInt(body, "seed", INT64_MIN, INT64_MAX, seed)) return e;
  if (seed) {
    s.seed = static_cast<uint64_t>(*seed);
    out.seeded = true;
  }
  if (auto e = ReadLogitBias(body, n_vocab, s.logit_bias)) return e;
  return std::nullopt;
}

// n, stop, logprobs, stream and stream_options: what the answer holds and how it comes.
std::optional<ApiError> ReadOutputOptions(const json& body, CompletionKind kind,
                                          CompletionRequest& out) {
  std::optional<int64_t> n;
  if (auto e = ReadInt(body, "n", 1, kMaxChoices, n)) return e;
  if (n) out.n = static_cast<int>(*n);
  if (auto e = ReadStop(body, out.stop)) return e;
  if (auto e = ReadLogprobs(body, kind, out)) return e;
  if (auto e = ReadBool(body, "stream", out.stream)) return e;
  if (const json* options = Field(body, "stream_options")) {
    if (!options->is_object()) return WrongType("stream_options", "an object", *options);
    if (auto e = ReadBool(*options, "include_usage", out.include_usage)) {
      e->message = "'stream_options.include_usage' must be true or false";
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  return std::nullopt;
}

// kvserve's own fields: ignore_eos, speculative, user, session_id, cache_salt, decoder_prompt,
// context_overflow, pinned_prefix_tokens.
std::optional<ApiError> ReadEngineOptions(const json& body, CompletionRequest& out) {
  if (auto e = ReadBool(body, "ignore_eos", out.ignore_eos)) return e;
  if (auto e = ReadBool(body, "speculative", out.speculative)) return e;
  if (auto e = ReadString(body, "user", kMaxIdBytes, out.user)) return e;
  if (auto e = ReadString(body, "session_id", kMaxIdBytes, out.session_id)) return e;
  if (auto e = ReadString(body, "cache_salt", kMaxIdBytes, out.cache_salt)) return e;
  if (auto e = ReadString(body, "decoder_prompt", 1 << 20, out.decoder_prompt)) return e;
  if (const json* overflow = Field(body, "context_overflow")) {
    const auto policy =
        overflow->is_string() ? ContextOverflowNamed(overflow->get<std::string>()) : std::nullopt;
    if (!policy) {
      return ApiError::BadRequest(
          "'context_overflow' must be \"error\" or \"shift\", got " + Shown(*overflow),
          "context_overflow");
    }
    out.context_overflow = *policy;
  }
  std::optional<int64_t> pinned;
  if (auto e = ReadInt(body, "pinned_prefix_tokens", 0, kMaxTokensLimit, pinned)) return e;
  if (pinned) out.pinned_prefix_tokens = static_cast<int>(*pinned);

  return std::nullopt;
}

// Parameters of OpenAI's API that we do not implement: refused rather than silently ignored.
std::optional<ApiError> RefuseUnsupported(const json& body) {
  std::optional<int64_t> best_of;
  if (auto e = ReadInt(body, "best_of", 1, 1, best_of)) {
    e->message = "'best_of' other than 1 is not supported";
    return e;
  }
  bool echo = false;
  if (auto e = ReadBool(body, "echo", echo)) return e;
  if (echo) return ApiError::BadRequest("'echo' is not supported", "echo");
  std::string suffix;
  if (auto e = ReadString(body, "suffix", 1 << 20, suffix)) return e;
  if (!suffix.empty()) return ApiError::BadRequest("'suffix' is not supported", "suffix");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const json& body, CompletionKind kind, int n_vocab,
                                               CompletionRequest& out) {
  out = CompletionRequest{.kind = kind};
  out.sampling.temperature = 1.0f;
  if (auto error = ReadString(body, "model", kMaxIdBytes, out.model)) return error;
  if (kind == CompletionKind::kText) {
    if (auto error = ReadPrompts(body, n_vocab, out.prompts)) return error;
    for (const char* chat_only : {"tools", "tool_choice"}) {
      if (Field(body, chat_only)) {
        return ApiError::BadRequest(
            "'" + std::string(chat_only) + "' is only taken by /v1/chat/completions", chat_only);
      }
    }
  } else {
    if (auto error = ReadMessages(body, out.messages)) return error;
    if (auto error = ReadChatOptions(body, out)) return error;
  }

  std::optional<int64_t> max_tokens, max_completion_tokens;
  if (auto e = ReadInt(body, "max_tokens", 1, kMaxTokensLimit, max_tokens)) return e;
  if (auto e = ReadInt(body, "max_completion_tokens", 1, kMaxTokensLimit, max_completion_tokens)) {
    return e;
  }
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) out.max_tokens = static_cast<int>(*max_tokens);

  if (auto e = ReadSampling(body, n_vocab, out)) return e;
  if (auto e = ReadOutputOptions(body, kind, out)) return e;
  if (auto e = ReadEngineOptions(body, out)) return e;
  if (auto e = RefuseUnsupported(body)) return e;
  const size_t n_prompts = out.prompts.empty() ? 1 : out.prompts.size();
  if (!out.session_id.empty() && out.n * n_prompts > 1) {
    return ApiError::BadRequest("'session_id' needs a single prompt and n = 1", "session_id");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatMessages(const json& body, std::vector<ChatMessage>& out) {
  if (!body.is_object()) return WrongType("body", "a JSON object", body);
  return ReadMessages(body, out);
}

std::optional<ApiError> ParseReasoningEffort(const json& body, std::string& out) {
  const json* effort = Field(body, "reasoning_effort");
  if (!effort) return std::nullopt;
  for (const char* level : {"low", "medium", "high"}) {
    if (*effort == level) {
      out = level;
      return std::nullopt;
    }
  }
  return ApiError::BadRequest(
      "'reasoning_effort' must be \"low\", \"medium\" or \"high\", got " + Shown(*effort),
      "reasoning_effort");
}

std::optional<ApiError> ParseChatTemplateKwargs(const json& body, bool& enable_thinking) {
  const json* kwargs = Field(body, "chat_template_kwargs");
  if (!kwargs) return std::nullopt;
  if (!kwargs->is_object()) return WrongType("chat_template_kwargs", "a JSON object", *kwargs);
  const auto it = kwargs->find("enable_thinking");
  if (it == kwargs->end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    return WrongType("chat_template_kwargs.enable_thinking", "true or false", *it);
  }
  enable_thinking = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ParseChatTools(const json& body, std::vector<ChatTool>& out) {
  const json* tools = Field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return WrongType("tools", "an array of tools", *tools);
  if (tools->size() > kMaxTools) {
    return ApiError::BadRequest("'tools' holds " + std::to_string(tools->size()) +
                                    " tools; the limit is " + std::to_string(kMaxTools),
                                "tools");
  }
  for (size_t i = 0; i < tools->size(); ++i) {
    ChatTool tool;
    if (auto e = ReadTool((*tools)[i], "tools[" + std::to_string(i) + "]", tool)) return e;
    for (const ChatTool& earlier : out) {
      if (earlier.name == tool.name) {
        return ApiError::BadRequest(
            "'tools[" + std::to_string(i) + "].function.name' '" + tool.name + "' is offered twice",
            "tools");
      }
    }
    out.push_back(std::move(tool));
  }
  return std::nullopt;
}

void KeepToolKeyOrder(const std::string& body_text, std::vector<ChatTool>& tools) {
  if (tools.empty()) return;
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(body_text, nullptr, false);
  if (!body.is_object() || !body.contains("tools") || !body["tools"].is_array()) return;
  const nlohmann::ordered_json& list = body["tools"];
  if (list.size() != tools.size()) return;
  for (size_t i = 0; i < tools.size(); ++i) {
    tools[i].json = list[i].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

}  // namespace kvserve
