// OpenAI's Responses API (POST /v1/responses, stateless). Translation: a Responses request becomes
// the chat body the OpenAI route reads (instructions, input items, flat function tools,
// tool_choice, text.format, logprobs), every bad field a 400 naming it and every stateful field
// refused; a chat completion becomes a response object (reasoning, message and function_call
// items, status, usage); chat chunks become the Responses events, whatever bytes they arrive in.
// Over HTTP (`kvserve serve` on stories260K): whole and streamed answers agree, a cut answer is
// "incomplete", a thinking model's reasoning is a reasoning item counted in reasoning_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/responses_api.h"
#include "server/responses_stream.h"
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers
using nlohmann::json;

TEST(ResponsesRequestTest, TranslatesInputItemsToolsAndFormat) {
  const json body = json::parse(R"({
    "model": "m", "max_output_tokens": 64, "temperature": 0.5, "top_p": 0.9, "stream": true,
    "store": true, "metadata": {"k": "v"}, "unknown_field": 1, "seed": 7,
    "instructions": "Be brief.",
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
               "strict": true}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "text": {"format": {"type": "json_schema", "name": "answer", "strict": true,
                        "schema": {"type": "object"}}},
    "top_logprobs": 3, "reasoning": {"effort": "high", "summary": "auto"},
    "input": [
      {"role": "developer", "content": "Use Celsius."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me see."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "21 C"},
      {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "?"}]}]})");
  json chat;
  ASSERT_FALSE(ResponsesToChat(body, chat).has_value());
  const json expected = json::parse(R"({
    "model": "m", "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "seed": 7, "stream": true,
    "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
    "logprobs": true, "top_logprobs": 3, "reasoning_effort": "high",
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
               "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true,
                        "schema": {"type": "object"}}},
    "messages": [
      {"role": "system", "content": "Be brief.\n\nUse Celsius."},
      {"role": "user", "content": "Paris?"},
      {"role": "assistant", "content": "Let me see.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
      {"role": "tool", "tool_call_id": "call_2", "content": "?"}]})");
  EXPECT_EQ(chat, expected) << chat.dump(1);

  json plain;
  ASSERT_FALSE(ResponsesToChat(json{{"model", "m"}, {"input", "Hi"}}, plain).has_value());
  EXPECT_EQ(plain,
            json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})"));
  // A function call with no assistant text before it opens an assistant turn of its own.
  json calls;
  ASSERT_FALSE(ResponsesToChat(json::parse(R"({"model": "m", "input": [
      {"role": "user", "content": "x"},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})"),
                               calls)
                   .has_value());
  EXPECT_EQ(calls["messages"][1]["role"], "assistant");
  EXPECT_TRUE(calls["messages"][1]["content"].is_null());
  json object;
  ASSERT_FALSE(ResponsesToChat(json::parse(R"({"model": "m", "input": "x",
      "text": {"format": {"type": "json_object"}}, "include": ["message.output_text.logprobs"]})"),
                               object)
                   .has_value());
  EXPECT_EQ(object["response_format"], json::parse(R"({"type": "json_object"})"));
  EXPECT_EQ(object["logprobs"], true);
}

TEST(ResponsesRequestTest, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"input": "x"})", "model"},
      {R"({"model": "m"})", "input"},
      {R"({"model": "m", "input": []})", "input"},
      {R"({"model": "m", "input": 5})", "input"},
      {R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"model": "m", "input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"model": "m", "input": "x", "background": true})", "background"},
      {R"({"model": "m", "input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"model": "m", "input": "x", "instructions": 3})", "instructions"},
      {R"({"model": "m", "input": "x", "stream": "yes"})", "stream"},
      {R"({"model": "m", "input": "x", "top_logprobs": 21})", "top_logprobs"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function"}]})", "tools[0].name"},
      {R"({"model": "m", "input": "x", "tool_choice": "sometimes"})", "tool_choice"},
      {R"({"model": "m", "input": "x", "tool_choice": {"type": "function"}})", "tool_choice.name"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type"},
      {R"({"model": "m", "input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"model": "m", "input": [{"role": "user"}]})", "input[0].content"},
      {R"({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]})",
       "input[0].content[0].type"},
      {R"({"model": "m", "input": [{"type": "item_reference", "id": "x"}]})", "input[0].type"},
      {R"({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})",
       "input[0].call_id"},
      {R"({"model": "m", "input": [{"type": "function_call_output", "call_id": "c"}]})",
       "input[0].output"},
      {R"({"model": "m", "input": [{"type": "computer_call"}]})", "input[0].type"},
      {R"({"model": "m", "input": "x", "reasoning": "high"})", "reasoning"},
      {R"({"model": "m", "input": "x", "reasoning": {"effort": "max"}})", "reasoning.effort"},
  };
  for (const auto& [text, field] : cases) {
    json chat;
    auto error = ResponsesToChat(json::parse(text), chat);
    ASSERT_TRUE(error.has_value()) << text;
    EXPECT_EQ(error->http_status, 400) << text;
    EXPECT_EQ(error->param, field) << text << ": " << error->message;
    EXPECT_NE(error->message.find(field), std::string::npos) << error->message;
  }
}

TEST(ResponsesResponseTest, ItemsStatusAndUsage) {
  const json completion = json::parse(R"({
    "id": "chatcmpl-42", "object": "chat.completion", "created": 1700000000, "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "reasoning_content": "think", "content": "Calling.",
      "tool_calls": [{"id": "call_a", "type": "function",
                      "function": {"name": "f", "arguments": "{\"x\":1}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16,
              "prompt_tokens_details": {"cached_tokens": 4},
              "completion_tokens_details": {"reasoning_tokens": 2}}})");
  const json shell = ResponseShell(json::parse(R"({"model": "m", "input": "x",
      "instructions": "I", "tools": [{"type": "function", "name": "f"}], "temperature": 0})"));
  const json response = ResponseJson(completion, shell);
  EXPECT_EQ(response["id"], "resp_42");
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["created_at"], 1700000000);
  EXPECT_EQ(response["instructions"], "I");
  EXPECT_EQ(response["temperature"], 0);
  EXPECT_EQ(response["store"], false);
  EXPECT_EQ(response["text"]["format"]["type"], "text");
  const json& output = response["output"];
  ASSERT_EQ(output.size(), 3u) << response.dump(1);
  EXPECT_EQ(output[0], json::parse(R"({"type": "reasoning", "id": "rs_42", "status": "completed",
      "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]})"));
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["id"], "msg_42");
  EXPECT_EQ(output[1]["content"][0]["text"], "Calling.");
  EXPECT_EQ(output[2],
            json::parse(R"({"type": "function_call", "id": "fc_42_0", "call_id": "call_a",
      "name": "f", "arguments": "{\"x\":1}", "status": "completed"})"));
  EXPECT_EQ(response["usage"], json::parse(R"({"input_tokens": 10, "output_tokens": 6,
      "total_tokens": 16, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
      "output_tokens_details": {"reasoning_tokens": 2}})"));

  json cut = completion;
  cut["choices"][0]["finish_reason"] = "length";
  cut["choices"][0]["message"] = {{"role", "assistant"}, {"content", "Half"}};
  const json incomplete = ResponseJson(cut, shell);
  EXPECT_EQ(incomplete["status"], "incomplete");
  EXPECT_EQ(incomplete["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(incomplete["output"][0]["status"], "incomplete");
  cut["choices"][0]["finish_reason"] = "timeout";
  const json failed = ResponseJson(cut, shell);
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"]["code"], "server_error");
}

// The events of a Responses stream, each checked to name its type twice and to count in order.
std::vector<json> Events(const std::string& text, std::vector<std::string>* names = nullptr) {
  std::vector<json> events;
  size_t start = 0;
  for (size_t end = text.find("\n\n"); end != std::string::npos; end = text.find("\n\n", start)) {
    const std::string event = text.substr(start, end - start);
    start = end + 2;
    if (event.starts_with(":")) continue;
    const size_t data = event.find("\ndata: ");
    EXPECT_TRUE(event.starts_with("event: ") && data != std::string::npos) << event;
    if (data == std::string::npos) continue;
    events.push_back(json::parse(event.substr(data + 7)));
    EXPECT_EQ(event.substr(7, data - 7), events.back()["type"]) << event;
    EXPECT_EQ(events.back()["sequence_number"], events.size() - 1) << event;
    if (names) names->push_back(events.back()["type"]);
  }
  EXPECT_EQ(start, text.size()) << "a partial event at the end";
  return events;
}

TEST(ResponsesStreamTest, ChunksBecomeEventsWhateverTheirBytes) {
  const std::string chunks =
      R"(data: {"id":"chatcmpl-9","created":5,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]})"
      "\n\n: keep-alive\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}]},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"finish_reason":null}]})"
      "\n\n"
      R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})"
      "\n\n"
      R"(data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}})"
      "\n\ndata: [DONE]\n\n";
  const json shell = ResponseShell(json{{"model", "m"}, {"input", "x"}});
  for (size_t piece : {chunks.size(), size_t{1}, size_t{7}}) {
    ResponsesStream stream(shell);
    std::string text;
    for (size_t at = 0; at < chunks.size(); at += piece) {
      text += stream.Push(chunks.substr(at, piece));
    }
    EXPECT_NE(text.find(": keep-alive\n\n"), std::string::npos);
    std::vector<std::string> names;
    const std::vector<json> events = Events(text, &names);
    const std::vector<std::string> expected = {"response.created",
                                               "response.in_progress",
                                               "response.output_item.added",  // reasoning
                                               "response.content_part.added",
                                               "response.reasoning_text.delta",
                                               "response.reasoning_text.done",
                                               "response.content_part.done",
                                               "response.output_item.done",
                                               "response.output_item.added",  // message
                                               "response.content_part.added",
                                               "response.output_text.delta",
                                               "response.output_text.done",
                                               "response.content_part.done",
                                               "response.output_item.done",
                                               "response.output_item.added",  // function call
                                               "response.function_call_arguments.delta",
                                               "response.function_call_arguments.done",
                                               "response.output_item.done",
                                               "response.completed"};
    ASSERT_EQ(names, expected) << text;
    EXPECT_EQ(events[0]["response"]["id"], "resp_9");
    EXPECT_EQ(events[0]["response"]["status"], "in_progress");
    EXPECT_EQ(events[2]["item"]["id"], "rs_9");
    EXPECT_EQ(events[4]["delta"], "hm");
    EXPECT_EQ(events[10]["output_index"], 1);
    EXPECT_EQ(events[10]["logprobs"][0]["token"], "Hi");
    EXPECT_EQ(events[14]["item"]["call_id"], "call_1");
    EXPECT_EQ(events[14]["item"]["id"], "fc_9_0");
    EXPECT_EQ(events[16]["arguments"], "{\"a\":1}");
    const json& done = events.back()["response"];
    EXPECT_EQ(done["status"], "completed");
    ASSERT_EQ(done["output"].size(), 3u);
    EXPECT_EQ(done["output"][0], events[7]["item"]);
    EXPECT_EQ(done["output"][1], events[13]["item"]);
    EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hi");
    EXPECT_EQ(done["output"][2], events[17]["item"]);
    EXPECT_EQ(done["usage"]["input_tokens"], 10);
    EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 4);
    EXPECT_EQ(done["usage"]["output_tokens"], 5);
  }
}

class ResponsesServerTest : public SharedServeTest<ResponsesServerTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "chatml", "-c", "1024", "--api-key", "secret-1"};
  }
};

json Story(bool stream, int max_output_tokens = 24) {
  return {{"model", "stories260K"},     {"instructions", "You tell stories."},
          {"input", "Tell me a story"}, {"max_output_tokens", max_output_tokens},
          {"temperature", 0},           {"stream", stream}};
}

httplib::Headers Bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

// The output items of a stream: each output_item.done's item, in output order.
json StreamedOutput(const std::vector<json>& events) {
  json output = json::array();
  for (const json& event : events) {
    if (event["type"] == "response.output_item.done") output.push_back(event["item"]);
  }
  return output;
}

// Text and ids aside, the items a whole answer and its stream give agree.
json WithoutIds(json output) {
  for (json& item : output) item.erase("id");
  return output;
}

TEST_F(ResponsesServerTest, WholeAndStreamedAgree) {
  for (int max_tokens : {24, 3}) {
    Reply whole = Post(*client_, "/v1/responses", Story(false, max_tokens), Bearer("secret-1"));
    ASSERT_EQ(whole.status, 200) << whole.text;
    EXPECT_EQ(whole.body["object"], "response");
    ASSERT_EQ(whole.body["output"].size(), 1u) << whole.text;
    EXPECT_FALSE(whole.body["output"][0]["content"][0]["text"].get<std::string>().empty());
    if (max_tokens == 3) {
      EXPECT_EQ(whole.body["status"], "incomplete") << whole.text;
      EXPECT_EQ(whole.body["usage"]["output_tokens"], 3);
    }
    auto result = client_->Post("/v1/responses", Bearer("secret-1"), Story(true, max_tokens).dump(),
                                "application/json");
    ASSERT_TRUE(result);
    ASSERT_EQ(result->status, 200) << result->body;
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream");
    const std::vector<json> events = Events(result->body);
    ASSERT_GE(events.size(), 3u);
    const json& last = events.back();
    EXPECT_EQ(last["type"],
              whole.body["status"] == "completed" ? "response.completed" : "response.incomplete");
    EXPECT_EQ(WithoutIds(StreamedOutput(events)), WithoutIds(whole.body["output"]));
    EXPECT_EQ(WithoutIds(last["response"]["output"]), WithoutIds(whole.body["output"]));
    EXPECT_EQ(last["response"]["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
    // The same prompt: the stream reads it from the prefix cache.
    EXPECT_GT(last["response"]["usage"]["input_tokens_details"]["cached_tokens"], 0);
  }
}

TEST_F(ResponsesServerTest, ErrorsKeepOpenAisShape) {
  json bad = Story(false);
  bad["previous_response_id"] = "resp_1";
  Reply reply = Post(*client_, "/v1/responses", bad, Bearer("secret-1"));
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body["error"]["param"], "previous_response_id") << reply.text;
  bad = Story(false);
  bad["model"] = "gpt-nonexistent";
  reply = Post(*client_, "/v1/responses", bad, Bearer("secret-1"));
  EXPECT_EQ(reply.status, 404) << reply.text;
  bad = Story(false);
  bad["temperature"] = 9;
  reply = Post(*client_, "/v1/responses", bad, Bearer("secret-1"));
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body["error"]["param"], "temperature") << reply.text;
  EXPECT_EQ(Post(*client_, "/v1/responses", std::string("{not json"), Bearer("secret-1")).status,
            400);
  EXPECT_EQ(Post(*client_, "/v1/responses", Story(false), Bearer("wrong")).status, 401);
  EXPECT_EQ(Post(*client_, "/v1/responses", Story(false)).status, 401);
}

// deepseek-r1's cue opens <think>: the reasoning is an item of its own, counted in
// reasoning_tokens, whole and streamed.
class ResponsesThinkingTest : public SharedServeTest<ResponsesThinkingTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "deepseek-r1", "-c", "512", "--reasoning-budget", "5"};
  }
};

TEST_F(ResponsesThinkingTest, ReasoningItemWholeAndStreamed) {
  json body = Story(false, 40);
  Reply whole = Post(*client_, "/v1/responses", body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const json& output = whole.body["output"];
  ASSERT_GE(output.size(), 1u) << whole.text;
  EXPECT_EQ(output[0]["type"], "reasoning") << whole.text;
  EXPECT_FALSE(output[0]["content"][0]["text"].get<std::string>().empty());
  const int reasoning_tokens = whole.body["usage"]["output_tokens_details"]["reasoning_tokens"];
  EXPECT_GE(reasoning_tokens, 5) << whole.text;  // the budget, the opening cue's tokens aside
  EXPECT_LT(reasoning_tokens, whole.body["usage"]["output_tokens"].get<int>()) << whole.text;
  body["stream"] = true;
  auto result = client_->Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(result);
  const std::vector<json> events = Events(result->body);
  EXPECT_EQ(WithoutIds(StreamedOutput(events)), WithoutIds(output)) << result->body;
  const json& usage = events.back()["response"]["usage"];
  EXPECT_EQ(usage["output_tokens"], whole.body["usage"]["output_tokens"]);
  EXPECT_EQ(usage["output_tokens_details"], whole.body["usage"]["output_tokens_details"]);
}

}  // namespace
}  // namespace kvserve
