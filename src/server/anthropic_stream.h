// The /v1/messages reply: the OpenAI chat route's answer (whole JSON or its SSE stream) turned
// into Anthropic's message or its events, as they come. AnthropicStream is the event translator:
// OpenAI chunks in, Anthropic's named events out.
//
//   AnthropicStream stream;
//   std::string events = stream.Push("data: {...}\n\n");  // "event: content_block_delta\n..."
//
// Events: message_start, then per block content_block_start / content_block_delta (text_delta,
// thinking_delta, input_json_delta) / content_block_stop, then message_delta (stop_reason,
// usage), message_stop; a keep-alive comment becomes a ping. One per response; not thread-safe.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace kvserve {

class AnthropicStream {
 public:
  // `stop_sequences`: the request's (a JSON array, or null), to tell its stop sequences from the
  // template's stop strings.
  explicit AnthropicStream(nlohmann::json stop_sequences = nullptr)
      : stop_sequences_(std::move(stop_sequences)) {}

  // Any piece of the OpenAI event text; returns the Anthropic event text it completes.
  std::string Push(std::string_view sse);

 private:
  std::string Chunk(const nlohmann::json& chunk);
  std::string Delta(const nlohmann::json& delta);
  std::string Open(const std::string& type, nlohmann::json block);
  std::string Close();
  std::string End(const nlohmann::json& usage);

  std::string buffer_;  // an event not complete yet
  bool started_ = false;
  bool ended_ = false;
  int index_ = -1;    // the last block's index
  std::string open_;  // the open block's type; "" when none is open
  nlohmann::json stop_sequences_;
  std::string stop_reason_ = "end_turn";
  std::string stop_sequence_;  // the matched stop sequence when stop_reason_ is "stop_sequence"
};

// Replies on `response` with the Anthropic form of `chat`, the OpenAI route's reply to the
// translated request: errors in Anthropic's error shape, a whole chat.completion as a message, a
// stream as Anthropic events (the stream's provider and releaser move to `response`).
// `stop_sequences`: the request's, as for AnthropicMessageJson.
void ReplyAnthropic(httplib::Response& chat, const nlohmann::json& stop_sequences,
                    httplib::Response& response);

}  // namespace kvserve
