#include "server/anthropic_stream.h"

#include <memory>

#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/sse_relay.h"

namespace kvserve {

using nlohmann::json;

namespace {

std::string Event(const char* name, const json& data) {
  return std::string("event: ") + name + "\ndata: " + DumpJson(data) + "\n\n";
}

json ZeroUsage() {
  return {{"input_tokens", 0},
          {"output_tokens", 0},
          {"cache_read_input_tokens", 0},
          {"cache_creation_input_tokens", 0}};
}

}  // namespace

std::string AnthropicStream::Push(std::string_view sse) {
  std::string out;
  for (const std::string& event : TakeSseEvents(buffer_, sse)) {
    if (event.starts_with(":")) {
      out += Event("ping", {{"type", "ping"}});
      continue;
    }
    if (!event.starts_with("data: ")) continue;
    const std::string_view data = std::string_view(event).substr(6);
    if (data == "[DONE]") {
      if (!ended_) out += End(json::object());
      out += Event("message_stop", {{"type", "message_stop"}});
      continue;
    }
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_object()) out += Chunk(chunk);
  }
  return out;
}

std::string AnthropicStream::Chunk(const json& chunk) {
  std::string out;
  if (!started_) {
    started_ = true;
    out += Event("message_start", {{"type", "message_start"},
                                   {"message",
                                    {{"id", AnthropicId(chunk.value("id", ""), "msg_")},
                                     {"type", "message"},
                                     {"role", "assistant"},
                                     {"model", chunk.value("model", "")},
                                     {"content", json::array()},
                                     {"stop_reason", nullptr},
                                     {"stop_sequence", nullptr},
                                     {"usage", ZeroUsage()}}}});
  }
  auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const json& choice = choices->at(0);
    if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      out += Delta(*delta);
    }
    if (auto finish = choice.find("finish_reason"); finish != choice.end() && finish->is_string()) {
      out += Close();
      const std::string stop_string = choice.value("stop_reason", "");
      stop_reason_ = AnthropicStopReason(finish->get<std::string>(), stop_string, stop_sequences_);
      if (stop_reason_ == "stop_sequence") stop_sequence_ = stop_string;
    }
    return out;
  }
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    out += End(*usage);
  }
  return out;
}

std::string AnthropicStream::Delta(const json& delta) {
  std::string out;
  auto text_of = [&](const char* name) {
    auto it = delta.find(name);
    return it != delta.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (const std::string reasoning = text_of("reasoning_content"); !reasoning.empty()) {
    if (open_ != "thinking") {
      out += Open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    }
    out += Event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index_},
                  {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
  }
  if (const std::string text = text_of("content"); !text.empty()) {
    if (open_ != "text") out += Open("text", {{"type", "text"}, {"text", ""}});
    out += Event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  auto calls = delta.find("tool_calls");
  if (calls == delta.end() || !calls->is_array()) return out;
  for (const json& call : *calls) {
    const json function = call.value("function", json::object());
    if (auto id = call.find("id"); id != call.end() && id->is_string()) {
      out += Open("tool_use", {{"type", "tool_use"},
                               {"id", AnthropicId(id->get<std::string>(), "toolu_")},
                               {"name", function.value("name", "")},
                               {"input", json::object()}});
    }
    const std::string arguments = function.value("arguments", "");
    if (arguments.empty() || open_ != "tool_use") continue;
    out += Event("content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index_},
                  {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments}}}});
  }
  return out;
}

std::string AnthropicStream::Open(const std::string& type, json block) {
  std::string out = Close();
  open_ = type;
  ++index_;
  return out + Event("content_block_start", {{"type", "content_block_start"},
                                             {"index", index_},
                                             {"content_block", std::move(block)}});
}

std::string AnthropicStream::Close() {
  if (open_.empty()) return "";
  open_.clear();
  return Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::End(const json& usage) {
  ended_ = true;
  return Close() +
         Event("message_delta",
               {{"type", "message_delta"},
                {"delta",
                 {{"stop_reason", stop_reason_},
                  {"stop_sequence", stop_sequence_.empty() ? json() : json(stop_sequence_)}}},
                {"usage", AnthropicUsageJson(usage)}});
}

void ReplyAnthropic(httplib::Response& chat, const json& stop_sequences,
                    httplib::Response& response) {
  if (chat.status != 200) {
    response.status = chat.status;
    if (chat.has_header("Retry-After")) {
      response.set_header("Retry-After", chat.get_header_value("Retry-After"));
    }
    response.set_content(DumpJson(AnthropicErrorFromOpenAi(chat.status, chat.body)),
                         "application/json");
    return;
  }
  if (!chat.content_provider_) {
    const json whole = json::parse(chat.body, nullptr, false);
    if (!whole.is_object() || !whole.contains("choices")) {
      const ApiError error = ApiError::Internal("the chat route's answer could not be read");
      response.status = error.http_status;
      response.set_content(DumpJson(AnthropicErrorJson(error)), "application/json");
      return;
    }
    response.status = 200;
    response.set_content(DumpJson(AnthropicMessageJson(whole, stop_sequences)), "application/json");
    return;
  }
  auto stream = std::make_shared<AnthropicStream>(stop_sequences);
  RelayStream(chat, response, [stream](std::string_view sse) { return stream->Push(sse); });
}

}  // namespace kvserve
