// Tool calls and reasoning over the OpenAI API. Parsing: tools, tool_choice (and the grammar hook
// it fills), parallel_tool_calls, reasoning_format, assistant tool_calls and tool results, every
// error naming its field and value; the answer shapes (message.tool_calls, reasoning_content,
// delta.tool_calls). Over HTTP (`kvserve serve` on stories260K with --chat-template chatml): a
// tool-call round trip (the call and its result sent back) is rendered Hermes style and answered,
// whole and streamed; invalid requests get 400s naming the field; a family without a tool format
// (plain) refuses tools by name. Reasoning (stories260K through deepseek-r1, whose cue opens the
// block): split out, kept inline with reasoning_format none, and cut by reasoning_budget_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/completion_request.h"
#include "server/completion_response.h"
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers
using nlohmann::json;

const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "Get the weather"},
      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};

json UserTurn() { return json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}}); }

// The round trip's second request: the call the model made and its result.
json RoundTrip() {
  json messages = UserTurn();
  messages.push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 21}"}});
  return {{"messages", messages},
          {"tools", {kWeatherTool}},
          {"max_tokens", 8},
          {"temperature", 0},
          {"seed", 7}};
}

CompletionRequest ParseChat(const json& body, std::optional<ApiError>* error) {
  CompletionRequest out;
  *error = ParseCompletionRequest(body, CompletionKind::kChat, 512, out);
  return out;
}

TEST(ToolRequestTest, ParsesToolsChoicesAndMessages) {
  std::optional<ApiError> error;
  json body = RoundTrip();
  CompletionRequest r = ParseChat(body, &error);
  ASSERT_FALSE(error) << error->message;
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.forced_tools.empty());
  EXPECT_TRUE(r.parallel_tool_calls);
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");

  // The grammar hook: "required" forces any tool, a named function that one; "none" nothing.
  body["tool_choice"] = "required";
  EXPECT_EQ(ParseChat(body, &error).forced_tools, std::vector<std::string>{"get_weather"});
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  r = ParseChat(body, &error);
  EXPECT_EQ(r.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(r.forced_tools, std::vector<std::string>{"get_weather"});
  body["tool_choice"] = "none";
  body["parallel_tool_calls"] = false;
  body["reasoning_format"] = "none";
  r = ParseChat(body, &error);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r.forced_tools.empty());
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.reasoning_format, ReasoningFormat::kNone);

  // The key order the client used survives for the templates.
  std::vector<ChatTool> tools = {{.name = "f", .json = "{}"}};
  KeepToolKeyOrder(
      R"({"tools": [{"type": "function", "function": {"name": "f", "b": 1, "a": 2}}]})", tools);
  EXPECT_EQ(tools[0].json, R"({"type":"function","function":{"name":"f","b":1,"a":2}})");
}

TEST(ToolRequestTest, ErrorsNameTheFieldAndValue) {
  struct Case {
    json patch;
    std::string param;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}},
       "tools",
       "'tools[0].function.name' must be 1 to 64 letters, digits, _ or -, got \"a b\""},
      {{{"tools", {{{"type", "retrieval"}}}}},
       "tools",
       "'tools[0].type' must be \"function\", got \"retrieval\""},
      {{{"tools", {kWeatherTool, kWeatherTool}}},
       "tools",
       "'tools[1].function.name' 'get_weather' is offered twice"},
      {{{"tools", "get_weather"}},
       "tools",
       "'tools' must be an array of tools, got \"get_weather\""},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}},
       "tool_choice",
       "'tool_choice' names the function 'get_time', which is not one of 'tools'"},
      {{{"tool_choice", "always"}}, "tool_choice", ""},
      {{{"tools", nullptr}, {"tool_choice", "required"}},
       "tool_choice",
       "'tool_choice' \"required\" needs 'tools'"},
      {{{"parallel_tool_calls", "yes"}}, "parallel_tool_calls", ""},
      {{{"reasoning_format", "raw"}},
       "reasoning_format",
       "'reasoning_format' must be \"none\" or \"deepseek\", got \"raw\""},
  };
  for (const Case& c : cases) {
    json body = RoundTrip();
    body.update(c.patch);
    if (body["tools"].is_null()) body.erase("tools");
    std::optional<ApiError> error;
    ParseChat(body, &error);
    ASSERT_TRUE(error) << c.patch.dump();
    EXPECT_EQ(error->param, c.param) << c.patch.dump();
    if (!c.message.empty()) {
      EXPECT_EQ(error->message, c.message);
    }
  }
  json bad_call = RoundTrip();
  bad_call["messages"][1]["tool_calls"][0]["function"].erase("name");
  std::optional<ApiError> error;
  ParseChat(bad_call, &error);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message,
            "'messages[1].tool_calls[0].function.name' must be a non-empty string, got null");
}

TEST(ToolResponseTest, MessageAndDeltaShapes) {
  const ChoiceResult choice{
      .text = "",
      .finish_reason = "tool_calls",
      .reasoning = "Paris, so the tool.",
      .tool_calls = {{.id = "call_x", .name = "get_weather", .arguments = "{\"city\":\"Paris\"}"}}};
  EXPECT_EQ(ResponseShaper::MessageJson(choice),
            json::parse(R"({"role": "assistant", "content": null,
              "reasoning_content": "Paris, so the tool.",
              "tool_calls": [{"id": "call_x", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})"));
  // Without calls or reasoning the message is as before.
  EXPECT_EQ(ResponseShaper::MessageJson(ChoiceResult{.text = "Hi"}),
            json::parse(R"({"role": "assistant", "content": "Hi"})"));
  EXPECT_EQ(ResponseShaper::ToolCallsJson(
                {{.index = 0, .id = "call_x", .name = "f"}, {.index = 0, .arguments = "{}"}}),
            json::parse(R"([{"index": 0, "id": "call_x", "type": "function",
                              "function": {"name": "f", "arguments": ""}},
                             {"index": 0, "function": {"arguments": "{}"}}])"));
}

class ServerToolsTest : public SharedServeTest<ServerToolsTest> {
 public:
  // stories260K's tiny vocabulary makes the tools block ~600 tokens.
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "chatml", "-c", "2048"};
  }
};

// RoundTrip() as a client writes it: the tool's keys in their usual order, not sorted.
std::string RoundTripText(json body = RoundTrip()) {
  std::string text = body.dump();
  const std::string sorted = kWeatherTool.dump();
  const size_t at = text.find(sorted);
  EXPECT_NE(at, std::string::npos);
  return text.replace(at, sorted.size(),
                      R"({"type":"function","function":{"name":"get_weather","description":"Get )"
                      R"(the weather","parameters":{"type":"object","properties":{"city":{"type":)"
                      R"("string"}}}}})");
}

TEST_F(ServerToolsTest, RoundTripIsRenderedHermesStyleAndAnswered) {
  Reply prompt = Post(*client_, "/apply-template", RoundTripText());
  ASSERT_EQ(prompt.status, 200) << prompt.text;
  const std::string text = prompt.body["prompt"];
  EXPECT_NE(
      text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                "\"description\": \"Get the weather\", \"parameters\": {\"type\": "
                "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
                      "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>"
                      "<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << text;

  Reply whole = Post(*client_, "/v1/chat/completions", RoundTripText());
  ASSERT_EQ(whole.status, 200) << whole.text;
  const json& choice = whole.body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  // stories260K writes stories, not calls: plain content, and the finish says so.
  ASSERT_TRUE(choice["message"]["content"].is_string()) << whole.text;
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << whole.text;
  EXPECT_TRUE(choice["finish_reason"] == "stop" || choice["finish_reason"] == "length");

  json streamed = RoundTrip();
  streamed["stream"] = true;
  auto result = client_->Post("/v1/chat/completions", RoundTripText(streamed), "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  SseStream stream = ParseSse(result->body);
  EXPECT_TRUE(stream.done);
  std::string finish;
  EXPECT_EQ(StreamText(stream, 0, &finish), choice["message"]["content"]);
  EXPECT_EQ(finish, choice["finish_reason"]);
}

TEST_F(ServerToolsTest, InvalidToolRequestsAre400sNamingTheField) {
  json body = RoundTrip();
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  Reply unknown = Post(*client_, "/v1/chat/completions", body);
  ExpectError(unknown, 400, "tool_choice");
  EXPECT_NE(unknown.text.find("get_time"), std::string::npos);
  body = RoundTrip();
  body["parallel_tool_calls"] = 1;
  ExpectError(Post(*client_, "/v1/chat/completions", body), 400, "parallel_tool_calls");
  ExpectError(Post(*client_, "/v1/completions",
                   json{{"prompt", "x"}, {"tools", {kWeatherTool}}, {"max_tokens", 1}}),
              400, "tools");
  // tool_choice "required" is accepted (a grammar enforces it: tool_choice_grammar_test and
  // ServerToolsMistralTest below).
  body = RoundTrip();
  body["tool_choice"] = "required";
  EXPECT_EQ(Post(*client_, "/v1/chat/completions", body).status, 200);
}

// Mistral's forced calls: the prompt ends with [TOOL_CALLS] and the grammar writes the array, so
// stories260K (which knows nothing of tools) answers with calls, whole and streamed alike.
TEST(ServerToolsMistralTest, ForcedChoiceAnswersWithCallsWholeAndStreamed) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--chat-template", "mistral", "-c", "2048"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  // The city from a list, so that the tiny story model's call ends within max_tokens.
  json tool = kWeatherTool;
  tool["function"]["parameters"]["properties"]["city"] = {{"enum", {"Paris", "Oslo"}}};
  tool["function"]["parameters"]["required"] = {"city"};
  json body = {{"messages", UserTurn()},       {"tools", {tool}},  {"tool_choice", "required"},
               {"parallel_tool_calls", false}, {"max_tokens", 64}, {"temperature", 0}};
  Reply whole = Post(*client, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const json& choice = whole.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << whole.text;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << whole.text;
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["id"].get<std::string>().size(), 9u);  // Mistral's ids
  const json arguments = json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(arguments.is_object()) << arguments;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << whole.text;
  // Streamed: the same call.
  body["stream"] = true;
  auto result = client->Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(result);
  std::string arguments_streamed, name;
  for (const json& chunk : ParseSse(result->body).events) {
    if (chunk["choices"].empty()) continue;
    for (const json& piece : chunk["choices"][0]["delta"].value("tool_calls", json::array())) {
      name += piece["function"].value("name", "");
      arguments_streamed += piece["function"].value("arguments", "");
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments_streamed, call["function"]["arguments"]);
  // A named function too.
  body["stream"] = false;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  Reply named = Post(*client, "/v1/chat/completions", body);
  ASSERT_EQ(named.status, 200) << named.text;
  EXPECT_EQ(named.body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            "get_weather");
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerToolsPlainTest, FamilyWithoutToolFormatRefusesByName) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--chat-template", "plain"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  Reply reply = Post(*client, "/v1/chat/completions", RoundTrip());
  ExpectError(reply, 400, "tools");
  EXPECT_EQ(reply.body["error"]["message"],
            "'tools': the chat template family 'plain' has no tool-call format");
  json no_tools = RoundTrip();
  no_tools.erase("tools");
  EXPECT_EQ(Post(*client, "/v1/chat/completions", no_tools).status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

// stories260K through the deepseek-r1 template: the generation cue opens <think>, so the whole
// output is reasoning unless the budget closes the block.
class ServerReasoningTest : public SharedServeTest<ServerReasoningTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--chat-template", "deepseek-r1", "-c", "512"};
  }
};

json Story(int budget) {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
          {"max_tokens", 40},
          {"temperature", 0},
          {"ignore_eos", true},
          {"reasoning_budget_tokens", budget}};
}

TEST_F(ServerReasoningTest, BudgetClosesTheBlockAndTheAnswerFollows) {
  Reply unbounded = Post(*client_, "/v1/chat/completions", Story(-1));
  ASSERT_EQ(unbounded.status, 200) << unbounded.text;
  const json& all = unbounded.body["choices"][0]["message"];
  EXPECT_EQ(all["content"], "") << unbounded.text;
  const std::string thought = all["reasoning_content"];
  EXPECT_FALSE(thought.empty());

  Reply budgeted = Post(*client_, "/v1/chat/completions", Story(5));
  ASSERT_EQ(budgeted.status, 200) << budgeted.text;
  const json& message = budgeted.body["choices"][0]["message"];
  const std::string reasoning = message["reasoning_content"];
  const std::string content = message["content"];
  EXPECT_FALSE(reasoning.empty()) << budgeted.text;
  EXPECT_FALSE(content.empty()) << budgeted.text;
  // The same first tokens, cut after five; the forced tag and the answer count as completion.
  EXPECT_EQ(thought.substr(0, reasoning.size()), reasoning);
  EXPECT_LT(reasoning.size(), thought.size());
  EXPECT_EQ(budgeted.body["usage"]["completion_tokens"], 40) << budgeted.text;
  EXPECT_EQ(budgeted.body["usage"]["prompt_tokens"], unbounded.body["usage"]["prompt_tokens"]);

  json streamed = Story(5);
  streamed["stream"] = true;
  auto result = client_->Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(result);
  SseStream stream = ParseSse(result->body);
  EXPECT_TRUE(stream.done);
  std::string streamed_reasoning;
  for (const json& event : stream.events) {
    for (const json& c : event["choices"]) {
      if (c["delta"].contains("reasoning_content"))
        streamed_reasoning += c["delta"]["reasoning_content"];
    }
  }
  EXPECT_EQ(streamed_reasoning, reasoning);
  EXPECT_EQ(StreamText(stream, 0), content);
}

TEST_F(ServerReasoningTest, FormatNoneKeepsItInlineAndBadValuesAre400s) {
  json inline_request = Story(-1);
  inline_request["reasoning_format"] = "none";
  Reply reply = Post(*client_, "/v1/chat/completions", inline_request);
  ASSERT_EQ(reply.status, 200) << reply.text;
  const json& message = reply.body["choices"][0]["message"];
  EXPECT_FALSE(message.contains("reasoning_content")) << reply.text;
  Reply split = Post(*client_, "/v1/chat/completions", Story(-1));
  EXPECT_EQ(message["content"], split.body["choices"][0]["message"]["reasoning_content"]);
  ExpectError(Post(*client_, "/v1/chat/completions", Story(0)), 400, "reasoning_budget_tokens");
}

}  // namespace
}  // namespace kvserve
