#include "server/completion_response.h"

#include "server/api_error.h"

namespace kvserve {

using nlohmann::json;

ResponseShaper::ResponseShaper(CompletionKind kind, std::string id, std::string model,
                               int64_t created, const Tokenizer& tokenizer, bool logprobs)
    : kind_(kind),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      tokenizer_(tokenizer),
      logprobs_(logprobs) {}

json ResponseShaper::Base(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json ResponseShaper::UsageJson(const UsageTotals& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
  if (usage.drafted_tokens > 0) {
    out["drafted_tokens"] = usage.drafted_tokens;
    out["accepted_tokens"] = usage.accepted_tokens;
  }
  if (usage.dropped_tokens > 0) out["dropped_tokens"] = usage.dropped_tokens;
  if (usage.reasoning_tokens > 0) {
    out["completion_tokens_details"] = {{"reasoning_tokens", usage.reasoning_tokens}};
  }
  return out;
}

json ResponseShaper::Logprobs(const std::vector<LogprobEntry>& entries) const {
  if (!logprobs_) return nullptr;
  if (kind_ == CompletionKind::kText) {
    // Legacy completions shape: parallel arrays.
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
         offsets = json::array();
    for (const LogprobEntry& entry : entries) {
      tokens.push_back(tokenizer_.TokenPiece(entry.token));
      token_logprobs.push_back(entry.logprob);
      json alternatives = json::object();
      for (const TokenLogprob& alt : entry.top) {
        alternatives[tokenizer_.TokenPiece(alt.token)] = alt.logprob;
      }
      top.push_back(entry.top.empty() ? json(nullptr) : alternatives);
      offsets.push_back(entry.text_offset);
    }
    return {{"tokens", tokens},
            {"token_logprobs", token_logprobs},
            {"top_logprobs", top},
            {"text_offset", offsets}};
  }
  auto token_json = [&](int32_t id, float logprob) {
    const std::string piece = tokenizer_.TokenPiece(id);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
    return json{{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
  };
  json content = json::array();
  for (const LogprobEntry& entry : entries) {
    json item = token_json(entry.token, entry.logprob);
    json top = json::array();
    for (const TokenLogprob& alt : entry.top) top.push_back(token_json(alt.token, alt.logprob));
    item["top_logprobs"] = top;
    content.push_back(std::move(item));
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json ResponseShaper::Whole(const std::vector<ChoiceResult>& choices,
                           const UsageTotals& usage) const {
  json out = Base(kind_ == CompletionKind::kText ? "text_completion" : "chat.completion");
  json list = json::array();
  for (const ChoiceResult& choice : choices) {
    json item = {{"index", choice.index}};
    if (kind_ == CompletionKind::kText) {
      item["text"] = choice.text;
    } else {
      item["message"] = MessageJson(choice);
    }
    item["logprobs"] = Logprobs(choice.logprobs);
    item["finish_reason"] = choice.finish_reason;
    if (!choice.stop_string.empty()) item["stop_reason"] = choice.stop_string;
    if (choice.dropped_tokens > 0) {
      item["truncated"] = true;
      item["dropped_tokens"] = choice.dropped_tokens;
    }
    list.push_back(std::move(item));
  }
  out["choices"] = std::move(list);
  out["usage"] = UsageJson(usage);
  return out;
}

json ResponseShaper::MessageJson(const ChoiceResult& choice) {
  json message = {{"role", "assistant"}};
  const bool calls = !choice.tool_calls.empty();
  message["content"] = calls && choice.text.empty() ? json(nullptr) : json(choice.text);
  if (!choice.reasoning.empty()) message["reasoning_content"] = choice.reasoning;
  if (calls) {
    json list = json::array();
    for (const ParsedToolCall& call : choice.tool_calls) {
      list.push_back({{"id", call.id},
                      {"type", "function"},
                      {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    message["tool_calls"] = std::move(list);
  }
  return message;
}

json ResponseShaper::ToolCallsJson(const std::vector<ToolCallChunk>& chunks) {
  json list = json::array();
  for (const ToolCallChunk& chunk : chunks) {
    json item = {{"index", chunk.index}};
    if (!chunk.id.empty()) {
      item["id"] = chunk.id;
      item["type"] = "function";
      item["function"] = {{"name", chunk.name}, {"arguments", chunk.arguments}};
    } else {
      item["function"] = {{"arguments", chunk.arguments}};
    }
    list.push_back(std::move(item));
  }
  return list;
}

json ResponseShaper::Chunk(const ChoiceDelta& delta, bool usage_null) const {
  const bool text = kind_ == CompletionKind::kText;
  json out = Base(text ? "text_completion" : "chat.completion.chunk");
  json item = {{"index", delta.index}};
  if (text) {
    item["text"] = delta.text;
  } else {
    json message = json::object();
    if (delta.first) message["role"] = "assistant";
    if (delta.first || !delta.text.empty()) message["content"] = delta.text;
    if (!delta.reasoning.empty()) message["reasoning_content"] = delta.reasoning;
    if (!delta.tool_calls.empty()) message["tool_calls"] = ToolCallsJson(delta.tool_calls);
    item["delta"] = std::move(message);
  }
  item["logprobs"] = delta.logprobs.empty() ? json(nullptr) : Logprobs(delta.logprobs);
  item["finish_reason"] = delta.finish_reason.empty() ? json(nullptr) : json(delta.finish_reason);
  if (!delta.stop_string.empty()) item["stop_reason"] = delta.stop_string;
  if (delta.dropped_tokens > 0) {
    item["truncated"] = true;
    item["dropped_tokens"] = delta.dropped_tokens;
  }
  out["choices"] = json::array({std::move(item)});
  if (usage_null) out["usage"] = nullptr;
  return out;
}

json ResponseShaper::UsageChunk(const UsageTotals& usage) const {
  json out = Base(kind_ == CompletionKind::kText ? "text_completion" : "chat.completion.chunk");
  out["choices"] = json::array();
  out["usage"] = UsageJson(usage);
  return out;
}

std::string Sse(const json& event) { return "data: " + DumpJson(event) + "\n\n"; }

}  // namespace kvserve
