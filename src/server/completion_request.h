// The body of POST /v1/completions and POST /v1/chat/completions, parsed and range-checked.
// Parsing needs no model except the vocabulary size (token ids, logit_bias keys); turning prompts
// into token ids happens in the routes, which own the tokenizer and chat template.
//
//   CompletionRequest request;
//   if (auto error = ParseCompletionRequest(body, CompletionKind::kChat, n_vocab, request)) ...
//
// Unknown fields are ignored (clients send extras); a known field of the wrong type or range is a
// 400 that names it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/output_format.h"
#include "tokenizer/chat_template.h"

namespace kvserve {

enum class CompletionKind { kText, kChat };  // /v1/completions, /v1/chat/completions

// OpenAI's "tool_choice".
enum class ToolChoice {
  kAuto,      // "auto" (the default): the model may call tools; calls are parsed
  kNone,      // "none": tools are still rendered (as vLLM and llama.cpp do), nothing is parsed
  kRequired,  // "required": the answer must be calls (enforced by a grammar, see forced_tools)
  kFunction,  // {"type": "function", "function": {"name": ...}}: that function must be called
};

// One prompt of /v1/completions: text, or token ids when the client sent integers.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct CompletionRequest {
  CompletionKind kind = CompletionKind::kText;
  std::string model;                  // "" when the client sent none
  std::vector<PromptInput> prompts;   // kText: one or more
  std::vector<ChatMessage> messages;  // kChat
  std::optional<int> max_tokens;      // absent: 16 for kText, the rest of the context for kChat
  SamplingParams sampling;            // temperature defaults to 1 as in OpenAI's API
  bool seeded = false;                // the client sent a seed
  std::vector<std::string> stop;
  int n = 1;              // choices per prompt
  bool logprobs = false;  // report logprobs of the chosen tokens
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // extension (as in vLLM): keep going past end-of-generation tokens
  std::string user;
  std::string session_id;  // extension: pin this conversation's KV blocks
  std::string cache_salt;  // extension: separates prefix-cache tenants
  // Extension, /v1/completions on an encoder-decoder model: the answer's forced start (the prompt
  // is the encoder's input).
  std::string decoder_prompt;
  bool speculative = true;  // extension: let the engine's speculative decoding draft (no change)
  // Extensions (docs/api.md, "Context overflow"): "error" | "shift" (absent: the server's
  // --context-overflow), and for shift the leading prompt tokens kept through every shift (absent:
  // none for completions, the rendered system message for chat).
  std::optional<ContextOverflow> context_overflow;
  std::optional<int> pinned_prefix_tokens;
  OutputFormat output;  // structured output: response_format, grammar or json_schema

  // Chat: OpenAI's tools. `tools` as the client sent them (ChatTool::json keeps its key order once
  // KeepToolKeyOrder has run on the body text).
  std::vector<ChatTool> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;     // kFunction: the function's name (one of `tools`)
  bool parallel_tool_calls = true;  // false: only the first call is returned
  // The functions the answer must call, filled for tool_choice "required" (every tool's name) and
  // a named function (that one); empty otherwise. OpenAiRoutes::ForceToolCalls turns it into the
  // grammar of the template's call syntax over these tools' "parameters" schemas
  // (server/tool_choice_grammar.h).
  std::vector<std::string> forced_tools;
  // Chat: "reasoning_format" ("none" | "deepseek"); absent: the server's --reasoning-format.
  std::optional<ReasoningFormat> reasoning_format;
  // Chat: "reasoning_budget_tokens" (llama.cpp's name): at most this many tokens inside the
  // <think> block, then the server closes it; -1 = no budget; absent: --reasoning-budget.
  std::optional<int> reasoning_budget;
  // Chat: "reasoning_effort" ("low" | "medium" | "high"; "" when absent), which templates that
  // take it write into the prompt (gpt-oss's "Reasoning: " line; the others ignore it).
  std::string reasoning_effort;
  // Chat: "chat_template_kwargs": {"enable_thinking": true} (vLLM's and llama-server's field),
  // which templates that take it write into the prompt (Gemma 4's thinking switch).
  bool enable_thinking = false;
};

// Fills `out` from `body`; returns the first problem found.
std::optional<ApiError> ParseCompletionRequest(const nlohmann::json& body, CompletionKind kind,
                                               int n_vocab, CompletionRequest& out);

// Limits, exposed for tests and docs/api.md.
inline constexpr int kMaxChoices = 16;      // n
inline constexpr int kMaxPrompts = 64;      // prompts in one /v1/completions request
inline constexpr int kMaxStopStrings = 16;  // OpenAI allows 4; we are more lenient
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxIdBytes = 256;  // session_id, cache_salt, user

// The "messages" array of a chat request (also read by /apply-template): roles and text, the
// assistant's tool_calls and the tool results' tool_call_id.
std::optional<ApiError> ParseChatMessages(const nlohmann::json& body,
                                          std::vector<ChatMessage>& out);
// "reasoning_effort": "low", "medium" or "high" into `out` (left as it is when absent or null);
// anything else is a 400 that names the field and the value (also read by /apply-template).
std::optional<ApiError> ParseReasoningEffort(const nlohmann::json& body, std::string& out);
// "chat_template_kwargs": an object whose "enable_thinking" (a boolean) goes to `enable_thinking`
// (left as it is when absent or null); its other keys are the template variables of Jinja
// templates that kvserve's templates do not have, and are ignored, as a Jinja template ignores
// variables it never reads. A wrong type is a 400 naming the field (also read by /apply-template).
std::optional<ApiError> ParseChatTemplateKwargs(const nlohmann::json& body, bool& enable_thinking);
// The "tools" array (also read by /apply-template).
std::optional<ApiError> ParseChatTools(const nlohmann::json& body, std::vector<ChatTool>& out);
inline constexpr size_t kMaxTools = 128;  // as OpenAI

// nlohmann::json sorts object keys, but templates print tools in the client's key order: re-reads
// "tools" from the body text keeping it. Call after a successful parse of the same text.
void KeepToolKeyOrder(const std::string& body_text, std::vector<ChatTool>& tools);

}  // namespace kvserve
