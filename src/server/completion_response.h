// OpenAI's response shapes for completions and chat completions, whole and as Server-Sent
// Events. Plain functions of their inputs: no engine, no sockets.
//
//   ResponseShaper shaper(CompletionKind::kChat, "chatcmpl-1", "stories260K", created, tokenizer);
//   json whole = shaper.Whole(choices, usage);           // "chat.completion"
//   std::string event = Sse(shaper.Chunk(delta));        // "data: {...}\n\n"
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/completion_request.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

// The logprob of one generated token and its alternatives.
struct LogprobEntry {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // most likely first
  size_t text_offset = 0;         // bytes into the choice's text where this token's text starts
};

// A finished choice (non-streamed responses).
struct ChoiceResult {
  int index = 0;
  std::string text;
  std::string finish_reason;  // "stop" | "length"
  // The stop string that ended the choice ("stop_reason", as vLLM reports it); "" for none.
  std::string stop_string;
  std::vector<LogprobEntry> logprobs;
  int dropped_tokens = 0;  // > 0: context shifts dropped them ("truncated": true)
  // Chat: the reasoning ("reasoning_content" when not empty) and the calls parsed out of the
  // text ("tool_calls"; the content is null when it is empty beside them).
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;
};

// Sums over the prompts of a request (a prompt counts once, whatever n is).
struct UsageTotals {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  int drafted_tokens = 0;  // speculative decoding (reported when any were drafted)
  int accepted_tokens = 0;
  int dropped_tokens = 0;    // by context shifts, over every choice (reported when any)
  int reasoning_tokens = 0;  // chat: inside reasoning blocks (completion_tokens_details, when any)
};

// A streamed piece of a tool call, as OpenAI's delta.tool_calls[] items: the first piece of a
// call carries its id, type and name, later ones argument text.
struct ToolCallChunk {
  int index = 0;     // the call's place among the choice's calls
  std::string id;    // "" after the first piece
  std::string name;  // with the id
  std::string arguments;
};

// One piece of a streamed choice.
struct ChoiceDelta {
  int index = 0;
  bool first = false;  // chat: carries role "assistant"
  std::string text;
  std::string reasoning;                  // chat: delta.reasoning_content
  std::vector<ToolCallChunk> tool_calls;  // chat: delta.tool_calls
  std::vector<LogprobEntry> logprobs;
  std::string finish_reason;  // "" while the choice goes on
  std::string stop_string;    // with the finish: the stop string that ended it ("stop_reason")
  int dropped_tokens = 0;     // with the finish: > 0 when context shifts dropped tokens
};

class ResponseShaper {
 public:
  // `tokenizer` is borrowed (token text for logprobs) and must outlive the shaper.
  ResponseShaper(CompletionKind kind, std::string id, std::string model, int64_t created,
                 const Tokenizer& tokenizer, bool logprobs);

  nlohmann::json Whole(const std::vector<ChoiceResult>& choices, const UsageTotals& usage) const;
  // A streamed chunk; with `usage_null` (stream_options.include_usage) it carries "usage": null.
  nlohmann::json Chunk(const ChoiceDelta& delta, bool usage_null) const;
  // The last chunk before [DONE] when include_usage was asked: no choices, the usage.
  nlohmann::json UsageChunk(const UsageTotals& usage) const;

  static nlohmann::json UsageJson(const UsageTotals& usage);
  // Chat: choices[].message, with reasoning_content and tool_calls when there are any.
  static nlohmann::json MessageJson(const ChoiceResult& choice);
  // Chat: delta.tool_calls.
  static nlohmann::json ToolCallsJson(const std::vector<ToolCallChunk>& chunks);

 private:
  nlohmann::json Logprobs(const std::vector<LogprobEntry>& entries) const;
  nlohmann::json Base(const char* object) const;

  CompletionKind kind_;
  std::string id_;
  std::string model_;
  int64_t created_;
  const Tokenizer& tokenizer_;
  bool logprobs_;
};

// "data: <json>\n\n"
std::string Sse(const nlohmann::json& event);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

}  // namespace kvserve
