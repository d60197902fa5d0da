// OpenAI's Responses API (POST /v1/responses), stateless, as a translation onto the chat route:
// the request becomes a /v1/chat/completions body (same template rendering, tool forms, output
// parser, grammar, engine requests, usage), and the chat completion that comes back becomes a
// "response" object whose output items are reasoning, message and function_call items. Plain
// functions of JSON: no engine, no sockets. Streaming is ResponsesStream
// (server/responses_stream.h).
//
//   nlohmann::json chat;
//   if (auto error = ResponsesToChat(body, chat)) return ReplyError(response, *error);
//   ... run `chat` through OpenAiRoutes::Completions ...
//   nlohmann::json object = ResponseJson(chat_completion, ResponseShell(body));
//
// Stateless: nothing is stored, so `previous_response_id`, `conversation` and `background` are
// refused with a 400 naming the field, and every response says "store": false. Unknown fields are
// ignored; a known field of the wrong type or value is an error that names it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace kvserve {

// A Responses request body -> the equivalent OpenAI chat body: instructions + input (a string, or
// message / function_call / function_call_output / reasoning items), tools (flat "function"
// tools), tool_choice, parallel_tool_calls, max_output_tokens, temperature, top_p, text.format
// (-> response_format), top_logprobs / include "message.output_text.logprobs" (-> logprobs),
// stream (with usage); kvserve's and llama.cpp's sampling extensions pass through as they are.
std::optional<ApiError> ResponsesToChat(const nlohmann::json& body, nlohmann::json& chat);

// The parts of a response object that echo the request (instructions, tools, tool_choice,
// sampling, text format, metadata...) with id, status, output and usage still to fill.
nlohmann::json ResponseShell(const nlohmann::json& body);

// A "chat.completion" object and the request's shell -> the finished "response" object.
nlohmann::json ResponseJson(const nlohmann::json& chat_completion, nlohmann::json shell);

// The chat choice's finish_reason -> the response's status ("completed", "incomplete" for
// "length", "failed" for an aborted or timed-out request) and the fields that go with it:
// sets status, incomplete_details and error on `response`.
void SetResponseStatus(const std::string& finish_reason, nlohmann::json& response);

// The chat usage -> the Responses usage (input/output tokens, cached and reasoning details).
nlohmann::json ResponseUsageJson(const nlohmann::json& usage);

// A chat choice's logprobs.content entries -> output_text logprobs ([] when there are none).
nlohmann::json ResponseLogprobsJson(const nlohmann::json& chat_logprobs);

// The output items, whole (the same in a response and in the stream's output_item.done events).
nlohmann::json MessageItemJson(const std::string& id, const std::string& status,
                               const std::string& text, nlohmann::json logprobs);
nlohmann::json ReasoningItemJson(const std::string& id, const std::string& status,
                                 const std::string& text);
nlohmann::json FunctionCallItemJson(const std::string& id, const std::string& status,
                                    const std::string& call_id, const std::string& name,
                                    const std::string& arguments);

// "chatcmpl-X" -> prefix + "X": "resp_", "msg_", "rs_"; a function call's item id is
// "fc_" + X + "_" + its index.
std::string ResponseItemId(const std::string& chat_id, const std::string& prefix);

}  // namespace kvserve
