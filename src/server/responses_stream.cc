#include "server/responses_stream.h"

#include <memory>

#include "server/api_error.h"
#include "server/responses_api.h"
#include "server/sse_relay.h"

namespace kvserve {

using nlohmann::json;

std::string ResponsesStream::Event(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return "event: " + type + "\ndata: " + DumpJson(data) + "\n\n";
}

std::string ResponsesStream::Push(std::string_view sse) {
  std::string out;
  for (const std::string& event : TakeSseEvents(buffer_, sse)) {
    if (event.starts_with(":")) {
      out += ": keep-alive\n\n";  // the chat stream's keep-alive comment
      continue;
    }
    if (!event.starts_with("data: ")) continue;
    const std::string_view data = std::string_view(event).substr(6);
    if (data == "[DONE]") {
      if (!ended_) out += End(json::object());
      continue;
    }
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_object()) out += Chunk(chunk);
  }
  return out;
}

std::string ResponsesStream::Start(const json& chunk) {
  started_ = true;
  chat_id_ = chunk.value("id", "");
  response_["id"] = ResponseItemId(chat_id_, "resp_");
  response_["created_at"] = chunk.value("created", 0);
  response_["model"] = chunk.value("model", "");
  response_["status"] = "in_progress";
  std::string out = Event("response.created", {{"response", response_}});
  return out + Event("response.in_progress", {{"response", response_}});
}

std::string ResponsesStream::Chunk(const json& chunk) {
  std::string out = started_ ? "" : Start(chunk);
  auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const json& choice = choices->at(0);
    if (auto logprobs = choice.find("logprobs"); logprobs != choice.end()) {
      for (json& entry : ResponseLogprobsJson(*logprobs)) pending_logprobs_.push_back(entry);
    }
    if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      auto text_of = [&](const char* name) {
        auto it = delta->find(name);
        return it != delta->end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      out += Text("reasoning", text_of("reasoning_content"), json::array());
      out += Text("message", text_of("content"), pending_logprobs_);
      if (auto calls = delta->find("tool_calls"); calls != delta->end() && calls->is_array()) {
        out += Calls(*calls);
      }
    }
    if (auto finish = choice.find("finish_reason"); finish != choice.end() && finish->is_string()) {
      finish_reason_ = finish->get<std::string>();
      out += Close();
    }
    return out;
  }
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    out += End(*usage);
  }
  return out;
}

// Reasoning or answer text: opens its item when another kind is open, then one delta event.
std::string ResponsesStream::Text(const std::string& type, const std::string& text,
                                  const json& logprobs) {
  if (text.empty()) return "";
  std::string out;
  if (open_.type != type) {
    const bool message = type == "message";
    json item = message ? json{{"type", "message"},
                               {"role", "assistant"},
                               {"status", "in_progress"},
                               {"content", json::array()}}
                        : json{{"type", "reasoning"},
                               {"status", "in_progress"},
                               {"summary", json::array()},
                               {"content", json::array()}};
    out += Open(type, std::move(item));
    json part = message ? json{{"type", "output_text"},
                               {"text", ""},
                               {"annotations", json::array()},
                               {"logprobs", json::array()}}
                        : json{{"type", "reasoning_text"}, {"text", ""}};
    out += Event("response.content_part.added", {{"item_id", open_.id},
                                                 {"output_index", open_.index},
                                                 {"content_index", 0},
                                                 {"part", std::move(part)}});
  }
  open_.text += text;
  json data = {
      {"item_id", open_.id}, {"output_index", open_.index}, {"content_index", 0}, {"delta", text}};
  if (type == "message") {
    for (const json& entry : logprobs) open_.logprobs.push_back(entry);
    data["logprobs"] = logprobs;
    pending_logprobs_ = json::array();
  }
  return out +
         Event(type == "message" ? "response.output_text.delta" : "response.reasoning_text.delta",
               std::move(data));
}

// delta.tool_calls pieces: a piece with an id opens a function_call item, arguments follow it.
std::string ResponsesStream::Calls(const json& calls) {
  std::string out;
  for (const json& call : calls) {
    const json function = call.value("function", json::object());
    if (auto id = call.find("id"); id != call.end() && id->is_string()) {
      json item = {{"type", "function_call"},
                   {"call_id", *id},
                   {"name", function.value("name", "")},
                   {"arguments", ""},
                   {"status", "in_progress"}};
      out += Open("function_call", std::move(item));
    }
    const std::string arguments = function.value("arguments", "");
    if (arguments.empty() || open_.type != "function_call") continue;
    open_.text += arguments;
    out += Event("response.function_call_arguments.delta",
                 {{"item_id", open_.id}, {"output_index", open_.index}, {"delta", arguments}});
  }
  return out;
}

std::string ResponsesStream::Open(const std::string& type, json item) {
  std::string out = Close();
  open_ = OpenItem{.type = type, .index = static_cast<int>(response_["output"].size())};
  if (type == "function_call") {
    open_.id = ResponseItemId(chat_id_, "fc_") + "_" + std::to_string(calls_++);
    open_.call = {{"call_id", item["call_id"]}, {"name", item["name"]}};
  } else {
    open_.id = ResponseItemId(chat_id_, type == "message" ? "msg_" : "rs_");
  }
  item["id"] = open_.id;
  response_["output"].push_back(nullptr);  // its place, filled when it closes
  return out + Event("response.output_item.added",
                     {{"output_index", open_.index}, {"item", std::move(item)}});
}

// The open item as it stands, with `status`.
json ResponsesStream::ItemJson(const char* status) const {
  if (open_.type == "function_call") {
    return FunctionCallItemJson(open_.id, status, open_.call["call_id"], open_.call["name"],
                                open_.text);
  }
  if (open_.type == "reasoning") return ReasoningItemJson(open_.id, status, open_.text);
  return MessageItemJson(open_.id, status, open_.text, open_.logprobs);
}

std::string ResponsesStream::Close() {
  if (open_.type.empty()) return "";
  const json item = ItemJson(finish_reason_ == "length" ? "incomplete" : "completed");
  const json place = {{"item_id", open_.id}, {"output_index", open_.index}};
  std::string out;
  if (open_.type == "function_call") {
    json done = place;
    done["name"] = open_.call["name"];
    done["arguments"] = open_.text;
    out += Event("response.function_call_arguments.done", std::move(done));
  } else {
    const json& part = item["content"][0];
    json done = place;
    done["content_index"] = 0;
    done["text"] = open_.text;
    if (open_.type == "message") done["logprobs"] = open_.logprobs;
    out += Event(
        open_.type == "message" ? "response.output_text.done" : "response.reasoning_text.done",
        std::move(done));
    json part_done = place;
    part_done["content_index"] = 0;
    part_done["part"] = part;
    out += Event("response.content_part.done", std::move(part_done));
  }
  response_["output"][static_cast<size_t>(open_.index)] = item;
  out += Event("response.output_item.done", {{"output_index", open_.index}, {"item", item}});
  open_ = OpenItem{};
  return out;
}

std::string ResponsesStream::End(const json& usage) {
  ended_ = true;
  std::string out = Close();
  response_["usage"] = ResponseUsageJson(usage);
  SetResponseStatus(finish_reason_, response_);
  const std::string status = response_["status"];
  const std::string type = status == "completed"    ? "response.completed"
                           : status == "incomplete" ? "response.incomplete"
                                                    : "response.failed";
  return out + Event(type, {{"response", response_}});
}

void ReplyResponses(httplib::Response& chat, const json& shell, httplib::Response& response) {
  if (chat.status == 200 && chat.content_provider_) {
    auto stream = std::make_shared<ResponsesStream>(shell);
    RelayStream(chat, response, [stream](std::string_view sse) { return stream->Push(sse); });
    return;
  }
  response.status = chat.status;
  for (const char* header : {"Retry-After", "WWW-Authenticate"}) {
    if (chat.has_header(header)) response.set_header(header, chat.get_header_value(header));
  }
  const json whole = chat.status == 200 ? json::parse(chat.body, nullptr, false) : json();
  if (!whole.is_object() || !whole.contains("choices")) {  // an error, in OpenAI's shape already
    if (chat.status == 200) {
      const ApiError error = ApiError::Internal("the chat route's answer could not be read");
      response.status = error.http_status;
      response.set_content(error.Body(), "application/json");
      return;
    }
    response.set_content(chat.body, "application/json");
    return;
  }
  response.set_content(DumpJson(ResponseJson(whole, shell)), "application/json");
}

}  // namespace kvserve
