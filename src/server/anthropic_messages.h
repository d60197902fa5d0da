// Anthropic's Messages API (POST /v1/messages) as a translation onto the OpenAI chat route: the
// request becomes a /v1/chat/completions body (same template rendering, tool forms, output parser,
// engine requests, usage), and the chat completion that comes back becomes an Anthropic message.
// Plain functions of JSON: no engine, no sockets. Streaming is AnthropicStream
// (server/anthropic_stream.h).
//
//   nlohmann::json chat;
//   if (auto error = AnthropicToChat(body, chat)) return Reply(AnthropicErrorJson(*error));
//   ... run `chat` through OpenAiRoutes::Completions ...
//   nlohmann::json message = AnthropicMessageJson(chat_completion);
//
// Unknown fields are ignored; a known field of the wrong type or value is an error that names it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace kvserve {

// An Anthropic request body -> the equivalent OpenAI chat body: system + messages (text,
// tool_use -> assistant tool_calls, tool_result -> "tool" messages), tools (input_schema ->
// parameters), tool_choice (any -> "required", tool -> a named function), max_tokens,
// stop_sequences, temperature, top_p, top_k, stream (with usage), thinking (enabled ->
// reasoning_format "deepseek" with its budget_tokens).
std::optional<ApiError> AnthropicToChat(const nlohmann::json& body, nlohmann::json& chat);

// A "chat.completion" object -> {"type": "message", "content": [thinking, text, tool_use blocks],
// "stop_reason", "stop_sequence", "usage"}. `stop_sequences`: the request's (a JSON array, or
// null).
nlohmann::json AnthropicMessageJson(const nlohmann::json& chat_completion,
                                    const nlohmann::json& stop_sequences = nullptr);

// A choice's finish_reason and stop string (the chat route's "stop_reason") -> Anthropic's
// stop_reason: "stop" -> "end_turn", or "stop_sequence" when the string is one of the request's
// `stop_sequences` (a chat template's own stop strings end the turn); "length" -> "max_tokens";
// "tool_calls" -> "tool_use".
std::string AnthropicStopReason(const std::string& finish_reason, const std::string& stop_string,
                                const nlohmann::json& stop_sequences);

// OpenAI's usage -> Anthropic's: input_tokens excludes the prompt tokens read from the prefix
// cache, which are cache_read_input_tokens.
nlohmann::json AnthropicUsageJson(const nlohmann::json& usage);

// "chatcmpl-..." -> "msg_...", "call_..." -> "toolu_...".
std::string AnthropicId(const std::string& openai_id, const std::string& prefix);

// {"type": "error", "error": {"type": "invalid_request_error", "message": ...}}, the type from
// the HTTP status as Anthropic names it.
nlohmann::json AnthropicErrorJson(const ApiError& error);
// An error response of the OpenAI routes (status and {"error": {...}} body) in Anthropic's shape.
nlohmann::json AnthropicErrorFromOpenAi(int status, const std::string& body);

}  // namespace kvserve
