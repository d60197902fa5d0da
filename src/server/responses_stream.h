// The /v1/responses reply: the chat route's answer (whole JSON or its SSE stream) turned into a
// "response" object or the Responses API's events, as they come. ResponsesStream is the event
// translator: chat chunks in, named Responses events out.
//
//   ResponsesStream stream(ResponseShell(body));
//   std::string events = stream.Push("data: {...}\n\n");  // "event: response.created\n..."
//
// Events, each with a sequence_number counting from 0: response.created, response.in_progress;
// per output item response.output_item.added, then for a message content_part.added,
// output_text.delta..., output_text.done, content_part.done; for reasoning the same with
// reasoning_text; for a function call function_call_arguments.delta..., .done; then
// response.output_item.done; at the end response.completed (or response.incomplete /
// response.failed) with the whole response. A keep-alive comment passes through. One per
// response; not thread-safe.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvserve {

class ResponsesStream {
 public:
  // `shell`: ResponseShell of the request (what the response echoes).
  explicit ResponsesStream(nlohmann::json shell) : response_(std::move(shell)) {}

  // Any piece of the chat route's event text; returns the Responses event text it completes.
  std::string Push(std::string_view sse);

 private:
  // The output item being written: its kind ("message", "reasoning", "function_call"; "" when
  // none is open), its place in the output, and what it has gathered.
  struct OpenItem {
    std::string type;
    int index = -1;
    std::string id;
    std::string text;  // text, reasoning or arguments so far
    nlohmann::json logprobs = nlohmann::json::array();
    nlohmann::json call;  // function_call: its call_id and name
  };

  std::string Event(const std::string& type, nlohmann::json data);
  std::string Start(const nlohmann::json& chunk);
  std::string Chunk(const nlohmann::json& chunk);
  std::string Text(const std::string& type, const std::string& text,
                   const nlohmann::json& logprobs);
  std::string Calls(const nlohmann::json& calls);
  std::string Open(const std::string& type, nlohmann::json item);
  std::string Close();
  std::string End(const nlohmann::json& usage);
  nlohmann::json ItemJson(const char* status) const;

  std::string buffer_;  // an event not complete yet
  nlohmann::json response_;
  std::string chat_id_;
  int sequence_ = 0;
  int calls_ = 0;  // function calls opened so far
  bool started_ = false;
  bool ended_ = false;
  std::string finish_reason_ = "stop";
  OpenItem open_;
  nlohmann::json pending_logprobs_ = nlohmann::json::array();  // not yet sent with text
};

// Replies on `response` with the Responses form of `chat`, the chat route's reply to the
// translated request: errors as they are (OpenAI's shape), a whole chat.completion as a response
// object, a stream as Responses events (the stream's provider and releaser move to `response`).
// `shell`: ResponseShell of the request.
void ReplyResponses(httplib::Response& chat, const nlohmann::json& shell,
                    httplib::Response& response);

}  // namespace kvserve
