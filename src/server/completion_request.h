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
#include "server/output_format.h"
#include "tokenizer/chat_template.h"

namespace kvserve {

enum class CompletionKind { kText, kChat };  // /v1/completions, /v1/chat/completions

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
  std::string session_id;   // extension: pin this conversation's KV blocks
  std::string cache_salt;   // extension: separates prefix-cache tenants
  bool speculative = true;  // extension: let the engine's speculative decoding draft (no change)
  // Extensions (docs/api.md, "Context overflow"): "error" | "shift" (absent: the server's
  // --context-overflow), and for shift the leading prompt tokens kept through every shift (absent:
  // none for completions, the rendered system message for chat).
  std::optional<ContextOverflow> context_overflow;
  std::optional<int> pinned_prefix_tokens;
  OutputFormat output;  // structured output: response_format, grammar or json_schema
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

// The "messages" array of a chat request (also read by /apply-template): roles and text.
std::optional<ApiError> ParseChatMessages(const nlohmann::json& body,
                                          std::vector<ChatMessage>& out);

}  // namespace kvserve
