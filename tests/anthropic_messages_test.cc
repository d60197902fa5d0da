// Anthropic's Messages API (POST /v1/messages). Translation: an Anthropic request becomes the chat
// body the OpenAI route reads (system, text/tool_use/tool_result blocks, tools, tool_choice,
// thinking, stop_sequences), every bad field a 400 naming it; a chat completion becomes a message
// (thinking, text and tool_use blocks, stop_reason, usage without the cache reads); OpenAI chunks
// become Anthropic's events, whatever bytes they arrive in. Over HTTP (`kvserve serve` on
// stories260K): whole and streamed answers agree, events come in Anthropic's order, errors and
// 401s take Anthropic's shape, x-api-key is accepted as the API key on every route, and a
// thinking model's reasoning is a thinking block, whole and streamed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/anthropic_messages.h"
#include "server/anthropic_stream.h"
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers
using nlohmann::json;

json Minimal() {
  return {{"model", "stories260K"},
          {"max_tokens", 16},
          {"messages", {{{"role", "user"}, {"content", "Hello"}}}}};
}

TEST(AnthropicRequestTest, TranslatesBlocksToolsChoiceAndThinking) {
  const json body = json::parse(R"({
    "model": "m", "max_tokens": 64, "temperature": 0.5, "top_k": 3, "stream": true,
    "stop_sequences": ["END"], "metadata": {"user_id": "u"}, "unknown_field": 1,
    "system": [{"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be brief."}],
    "thinking": {"type": "enabled", "budget_tokens": 100},
    "tools": [{"name": "get_weather", "description": "Weather",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21 C"}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
        {"type": "text", "text": "Thanks"}]}]})");
  json chat;
  ASSERT_FALSE(AnthropicToChat(body, chat).has_value());
  const json expected = json::parse(R"({
    "model": "m", "max_tokens": 64, "temperature": 0.5, "top_k": 3, "stream": true,
    "stream_options": {"include_usage": true}, "stop": ["END"],
    "reasoning_format": "deepseek", "reasoning_budget_tokens": 100,
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "tool_choice": "required", "parallel_tool_calls": false,
    "messages": [
      {"role": "system", "content": "Be kind.\nBe brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "toolu_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "21 C"},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: boom"},
      {"role": "user", "content": "Thanks"}]})");
  EXPECT_EQ(chat, expected) << chat.dump(2);

  json named = Minimal();
  named["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  ASSERT_FALSE(AnthropicToChat(named, chat).has_value());
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type": "function",
                                                 "function": {"name": "get_weather"}})"));
  named["tool_choice"] = {{"type", "none"}};
  named["thinking"] = {{"type", "disabled"}};
  ASSERT_FALSE(AnthropicToChat(named, chat).has_value());
  EXPECT_EQ(chat["tool_choice"], "none");
  EXPECT_FALSE(chat.contains("reasoning_format"));
  EXPECT_FALSE(chat.contains("stream_options"));
}

TEST(AnthropicRequestTest, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"max_tokens": null})", "max_tokens"},
      {R"({"max_tokens": 0})", "max_tokens"},
      {R"({"model": 3})", "model"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})",
       "messages[0].content[0].tool_use_id"},
      {R"({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a",
           "name": "f", "input": [1]}]}]})",
       "messages[0].content[0].input"},
      {R"({"system": [{"type": "image"}]})", "system[0]"},
      {R"({"stop_sequences": "END"})", "stop_sequences"},
      {R"({"stop_sequences": [""]})", "stop_sequences[0]"},
      {R"({"temperature": "hot"})", "temperature"},
      {R"({"stream": 1})", "stream"},
      {R"({"tools": [{"name": "f"}]})", "tools[0].input_schema"},
      {R"({"tools": [{"input_schema": {}}]})", "tools[0].name"},
      {R"({"tool_choice": {"type": "required"}})", "tool_choice.type"},
      {R"({"tool_choice": {"type": "tool"}})", "tool_choice.name"},
      {R"({"thinking": {"type": "enabled"}})", "thinking.budget_tokens"},
      {R"({"thinking": {"type": "on"}})", "thinking.type"},
  };
  for (const auto& [patch, field] : cases) {
    json body = Minimal();
    body.merge_patch(json::parse(patch));
    json chat;
    auto error = AnthropicToChat(body, chat);
    ASSERT_TRUE(error.has_value()) << patch;
    EXPECT_EQ(error->param, field) << patch;
    EXPECT_NE(error->message.find("'" + field + "'"), std::string::npos) << error->message;
    const json shaped = AnthropicErrorJson(*error);
    EXPECT_EQ(shaped["type"], "error");
    EXPECT_EQ(shaped["error"]["type"], "invalid_request_error");
  }
  json chat;
  EXPECT_TRUE(AnthropicToChat(json::array(), chat).has_value());
}

TEST(AnthropicResponseTest, MessageBlocksStopReasonAndUsage) {
  const json completion = json::parse(R"({
    "id": "chatcmpl-abc7", "object": "chat.completion", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "reasoning_content": "think", "content": "Let me look.",
      "tool_calls": [{"id": "call_x1", "type": "function",
                      "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
    "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39,
              "prompt_tokens_details": {"cached_tokens": 16}}})");
  const json expected = json::parse(R"({
    "id": "msg_abc7", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "thinking", "thinking": "think", "signature": ""},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_x1", "name": "f", "input": {"a": 1}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 14, "output_tokens": 9, "cache_read_input_tokens": 16,
              "cache_creation_input_tokens": 0}})");
  EXPECT_EQ(AnthropicMessageJson(completion), expected);
  const json stops = {"END"};
  EXPECT_EQ(AnthropicStopReason("stop", "", stops), "end_turn");
  EXPECT_EQ(AnthropicStopReason("stop", "END", stops), "stop_sequence");
  EXPECT_EQ(AnthropicStopReason("stop", "<|im_end|>", stops), "end_turn");  // the template's
  EXPECT_EQ(AnthropicStopReason("length", "", stops), "max_tokens");
  EXPECT_EQ(AnthropicErrorFromOpenAi(429, R"({"error": {"message": "slow down"}})"),
            json::parse(R"({"type": "error", "error": {"type": "rate_limit_error",
                                                       "message": "slow down"}})"));
  EXPECT_EQ(AnthropicErrorFromOpenAi(500, "not json")["error"]["type"], "api_error");
}

std::vector<json> Events(const std::string& text, std::vector<std::string>* names = nullptr) {
  std::vector<json> events;
  size_t start = 0;
  for (size_t end = text.find("\n\n"); end != std::string::npos;
       start = end + 2, end = text.find("\n\n", start)) {
    const std::string event = text.substr(start, end - start);
    const size_t data = event.find("\ndata: ");
    EXPECT_TRUE(event.starts_with("event: ") && data != std::string::npos) << event;
    if (data == std::string::npos) continue;
    events.push_back(json::parse(event.substr(data + 7)));
    EXPECT_EQ(event.substr(7, data - 7), events.back()["type"]) << event;
    if (names) names->push_back(events.back()["type"]);
  }
  EXPECT_EQ(start, text.size()) << "a partial event at the end";
  return events;
}

TEST(AnthropicStreamTest, ChunksBecomeEventsWhateverTheirBytes) {
  const std::string chunks =
      R"(data: {"id":"chatcmpl-9","model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]})"
      "\n\n: keep-alive\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})"
      "\n\n"
      R"(data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}})"
      "\n\ndata: [DONE]\n\n";
  for (size_t piece : {chunks.size(), size_t{1}, size_t{7}}) {
    AnthropicStream stream;
    std::string text;
    for (size_t at = 0; at < chunks.size(); at += piece)
      text += stream.Push(chunks.substr(at, piece));
    std::vector<std::string> names;
    const std::vector<json> events = Events(text, &names);
    const std::vector<std::string> expected = {
        "message_start",       "content_block_start", "content_block_delta", "ping",
        "content_block_stop",  "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",  "message_delta",
        "message_stop"};
    ASSERT_EQ(names, expected) << text;
    EXPECT_EQ(events[0]["message"]["id"], "msg_9");
    EXPECT_EQ(events[1]["content_block"]["type"], "thinking");
    EXPECT_EQ(events[2]["delta"], json::parse(R"({"type": "thinking_delta", "thinking": "hm"})"));
    EXPECT_EQ(events[6]["index"], 1);
    EXPECT_EQ(events[6]["delta"], json::parse(R"({"type": "text_delta", "text": "Hi"})"));
    EXPECT_EQ(events[8]["content_block"],
              json::parse(R"({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})"));
    EXPECT_EQ(events[9]["delta"],
              json::parse(R"({"type": "input_json_delta", "partial_json": "{\"a\":1}"})"));
    EXPECT_EQ(events[10]["index"], 2);
    EXPECT_EQ(events[11]["delta"]["stop_reason"], "tool_use");
    EXPECT_EQ(events[11]["usage"]["input_tokens"], 6);
    EXPECT_EQ(events[11]["usage"]["cache_read_input_tokens"], 4);
    EXPECT_EQ(events[11]["usage"]["output_tokens"], 5);
  }
}

// The text, thinking and tool_use blocks of a stream's events, rebuilt as a message's content.
json StreamedContent(const std::vector<json>& events) {
  json content = json::array();
  for (const json& event : events) {
    if (event["type"] == "content_block_start") {
      EXPECT_EQ(event["index"], content.size());
      content.push_back(event["content_block"]);
    } else if (event["type"] == "content_block_delta") {
      const json& delta = event["delta"];
      json& block = content.back();
      if (delta["type"] == "text_delta")
        block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
      if (delta["type"] == "thinking_delta") {
        block["thinking"] =
            block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      }
    }
  }
  return content;
}

class AnthropicServerTest : public SharedServeTest<AnthropicServerTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "chatml", "-c", "1024", "--api-key", "secret-1"};
  }
};

json Story(bool stream) {
  json body = Minimal();
  body["max_tokens"] = 24;
  body["temperature"] = 0;
  body["system"] = "You tell stories.";
  body["messages"][0]["content"] = "Tell me a story";
  body["stream"] = stream;
  return body;
}

httplib::Headers Key(const std::string& key) {
  return {{"x-api-key", key}, {"anthropic-version", "2023-06-01"}};
}

TEST_F(AnthropicServerTest, WholeAndStreamedAgree) {
  Reply whole = Post(*client_, "/v1/messages", Story(false), Key("secret-1"));
  ASSERT_EQ(whole.status, 200) << whole.text;
  EXPECT_EQ(whole.body["type"], "message");
  EXPECT_TRUE(whole.body["id"].get<std::string>().starts_with("msg_"));
  ASSERT_EQ(whole.body["content"].size(), 1u) << whole.text;
  EXPECT_EQ(whole.body["content"][0]["type"], "text");
  EXPECT_FALSE(whole.body["content"][0]["text"].get<std::string>().empty());
  const json& usage = whole.body["usage"];
  EXPECT_GT(usage["input_tokens"], 0);
  EXPECT_TRUE(whole.body["stop_reason"] == "end_turn" || whole.body["stop_reason"] == "max_tokens");
  if (whole.body["stop_reason"] == "max_tokens") {
    EXPECT_EQ(usage["output_tokens"], 24);
  }

  auto result =
      client_->Post("/v1/messages", Key("secret-1"), Story(true).dump(), "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> names;
  const std::vector<json> events = Events(result->body, &names);
  std::erase(names, "ping");
  std::erase(names, "content_block_delta");
  const std::vector<std::string> expected = {"message_start", "content_block_start",
                                             "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(names, expected) << result->body;
  EXPECT_EQ(StreamedContent(events), whole.body["content"]);
  const json& end = events[events.size() - 2];
  EXPECT_EQ(end["delta"]["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(end["usage"]["output_tokens"], usage["output_tokens"]);
  // The prompt is the same: the stream reads it from the prefix cache.
  EXPECT_EQ(
      end["usage"]["input_tokens"].get<int>() + end["usage"]["cache_read_input_tokens"].get<int>(),
      usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>());
  EXPECT_GT(end["usage"]["cache_read_input_tokens"], 0);
}

// A stop sequence from the middle of the answer ends it there, and the message says which.
TEST_F(AnthropicServerTest, StopSequenceIsReportedWholeAndStreamed) {
  Reply free = Post(*client_, "/v1/messages", Story(false), Key("secret-1"));
  ASSERT_EQ(free.status, 200) << free.text;
  const std::string text = free.body["content"][0]["text"];
  const size_t space = text.find(' ', text.size() / 2);
  ASSERT_NE(space, std::string::npos) << text;
  const std::string stop = text.substr(space, 3);
  json body = Story(false);
  body["stop_sequences"] = {"never-in-a-story", stop};
  Reply cut = Post(*client_, "/v1/messages", body, Key("secret-1"));
  ASSERT_EQ(cut.status, 200) << cut.text;
  EXPECT_EQ(cut.body["stop_reason"], "stop_sequence") << cut.text;
  EXPECT_EQ(cut.body["stop_sequence"], stop);
  EXPECT_EQ(cut.body["content"][0]["text"], text.substr(0, text.find(stop)));
  body["stream"] = true;
  auto result = client_->Post("/v1/messages", Key("secret-1"), body.dump(), "application/json");
  ASSERT_TRUE(result);
  const std::vector<json> events = Events(result->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(StreamedContent(events), cut.body["content"]);
  EXPECT_EQ(events[events.size() - 2]["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(events[events.size() - 2]["delta"]["stop_sequence"], stop);
  // Without stop sequences the end of a turn is end_turn with a null stop_sequence.
  EXPECT_TRUE(free.body["stop_sequence"].is_null());
  // The chat route reports the string as vLLM does: choices[].stop_reason.
  json chat = {{"messages",
                {{{"role", "system"}, {"content", "You tell stories."}},
                 {{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 24},
               {"temperature", 0},
               {"stop", {stop}}};
  Reply openai = Post(*client_, "/v1/chat/completions", chat, Key("secret-1"));
  ASSERT_EQ(openai.status, 200) << openai.text;
  EXPECT_EQ(openai.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(openai.body["choices"][0]["stop_reason"], stop) << openai.text;
  chat.erase("stop");
  openai = Post(*client_, "/v1/chat/completions", chat, Key("secret-1"));
  EXPECT_FALSE(openai.body["choices"][0].contains("stop_reason")) << openai.text;
}

TEST_F(AnthropicServerTest, ErrorsAndKeysTakeAnthropicsShape) {
  json bad = Story(false);
  bad["tool_choice"] = {{"type", "sometimes"}};
  Reply reply = Post(*client_, "/v1/messages", bad, Key("secret-1"));
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body["type"], "error") << reply.text;
  EXPECT_EQ(reply.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("tool_choice.type"),
            std::string::npos);
  // Errors of the chat route come back in Anthropic's shape too.
  bad = Story(false);
  bad["model"] = "claude-nonexistent";
  reply = Post(*client_, "/v1/messages", bad, Key("secret-1"));
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(reply.body["error"]["type"], "not_found_error") << reply.text;
  bad = Story(false);
  bad["temperature"] = 9;
  reply = Post(*client_, "/v1/messages", bad, Key("secret-1"));
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("temperature"),
            std::string::npos);
  EXPECT_EQ(Post(*client_, "/v1/messages", std::string("{not json"), Key("secret-1")).body["type"],
            "error");

  reply = Post(*client_, "/v1/messages", Story(false), Key("wrong"));
  EXPECT_EQ(reply.status, 401);
  EXPECT_EQ(reply.body["error"]["type"], "authentication_error") << reply.text;
  reply = Post(*client_, "/v1/messages", Story(false));
  EXPECT_EQ(reply.status, 401);
  // A wrong Bearer key is not rescued by a right x-api-key.
  httplib::Headers both = Key("secret-1");
  both.emplace("Authorization", "Bearer wrong");
  EXPECT_EQ(Post(*client_, "/v1/messages", Story(false), both).status, 401);
  // x-api-key works on every route; the OpenAI routes keep their error shape.
  auto models = client_->Get("/v1/models", Key("secret-1"));
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  reply = Post(*client_, "/v1/chat/completions", Story(false), Key("wrong"));
  EXPECT_EQ(reply.status, 401);
  EXPECT_TRUE(reply.body["error"].contains("param")) << reply.text;
  EXPECT_EQ(Post(*client_, "/v1/chat/completions", Story(false), Key("secret-1")).status, 200);
}

TEST_F(AnthropicServerTest, ToolRoundTripIsAccepted) {
  json body = Story(false);
  body["tools"] = {
      {{"name", "get_weather"},
       {"description", "Weather"},
       {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}};
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  body["messages"] = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                       "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                  "content": "21 C"}]}])");
  Reply reply = Post(*client_, "/v1/messages", body, Key("secret-1"));
  ASSERT_EQ(reply.status, 200) << reply.text;
  EXPECT_EQ(reply.body["type"], "message");
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_time"}};
  reply = Post(*client_, "/v1/messages", body, Key("secret-1"));
  EXPECT_EQ(reply.status, 400) << reply.text;
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("get_time"), std::string::npos);
}

// deepseek-r1's cue opens <think>: with thinking enabled the answer starts with a thinking block,
// and its budget closes the block so that text follows.
class AnthropicThinkingTest : public SharedServeTest<AnthropicThinkingTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "deepseek-r1", "-c", "512"};
  }
};

TEST_F(AnthropicThinkingTest, ThinkingBlockWholeAndStreamed) {
  json body = Story(false);
  body["max_tokens"] = 40;
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 5}};
  Reply whole = Post(*client_, "/v1/messages", body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const json& content = whole.body["content"];
  ASSERT_GE(content.size(), 1u) << whole.text;
  EXPECT_EQ(content[0]["type"], "thinking") << whole.text;
  EXPECT_FALSE(content[0]["thinking"].get<std::string>().empty());
  body["stream"] = true;
  auto result = client_->Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(StreamedContent(Events(result->body)), content) << result->body;
}

}  // namespace
}  // namespace kvserve
