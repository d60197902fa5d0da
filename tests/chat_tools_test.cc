// Tools in the chat templates: for every family with a tool format, a conversation with tools, a
// tool call and its result renders exactly as the family's real Jinja template renders it (the
// expected strings were worked out by hand from ../shared/models/chat-templates/*.jinja, with
// Hugging Face's tojson = json.dumps(ensure_ascii=False)); families without one are refused by
// name; Jinja's tojson itself.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/paths.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_json.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;

ChatTemplate DetectFile(const std::string& name) {
  std::ifstream in(ModelPath("chat-templates/" + name + ".jinja"), std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto t = ChatTemplate::Detect(buffer.str());
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

const std::vector<ChatTool> kTools = {
    {.name = "get_weather",
     .json = R"({"type":"function","function":{"name":"get_weather","description":"Get the )"
             R"(weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},)"
             R"("required":["city"]}}})"},
};
// tojson of kTools[0].
const std::string kToolJson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": )"
    R"(["city"]}}})";

ChatMessage Call(std::string id, std::string arguments = R"({"city":"Paris"})") {
  return ChatMessage{
      .role = "assistant",
      .tool_calls = {
          {.id = std::move(id), .name = "get_weather", .arguments = std::move(arguments)}}};
}

ChatMessage Result(std::string id, std::string content = R"({"temp": 21})") {
  return ChatMessage{.role = "tool", .content = std::move(content), .tool_call_id = std::move(id)};
}

// system, user, a call, its result.
std::vector<ChatMessage> Conversation(const std::string& id) {
  return {{.role = "system", .content = "You are helpful."},
          {.role = "user", .content = "Weather in Paris?"},
          Call(id),
          Result(id)};
}

const std::string kHermesToolsBlock =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
    kToolJson +
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

const std::string kHermesTurns =
    "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

TEST(ChatToolsTest, JinjaToJsonIsPythonJsonDumps) {
  EXPECT_EQ(JinjaToJson(R"({"b":1,"a":[true,null,"x"],"c":{}})"),
            R"({"b": 1, "a": [true, null, "x"], "c": {}})");  // keys keep their order
  EXPECT_EQ(JinjaToJson(R"({"a":[1,{"b":[]}]})", 4),
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": []\n        }\n    ]\n}");
  EXPECT_EQ(JinjaToJson("\"caf\xC3\xA9 \\u0001\\n\\\"\""), "\"caf\xC3\xA9 \\u0001\\n\\\"\"");
  EXPECT_EQ(JinjaToJson("{not json"), std::nullopt);
  // Deeper than kMaxJinjaJsonDepth: not re-dumped (templates then print the text as it is).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(JsonNestingDepth(deep), 100000);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[", "b": [{}]})"), 3);
  EXPECT_EQ(JinjaToJson(deep), std::nullopt);
  EXPECT_EQ(JinjaQuote("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
}

TEST(ChatToolsTest, Qwen25MatchesJinja) {
  const ChatTemplate t = DetectFile("Qwen-Qwen2.5-7B-Instruct");
  EXPECT_EQ(t.tool_format(), ToolFormat::kHermes);
  const auto messages = Conversation("call_1");
  ASSERT_TRUE(t.CheckToolUse(messages, kTools).ok());
  EXPECT_EQ(t.Render(messages, true, kTools),
            "<|im_start|>system\nYou are helpful.\n\n" + kHermesToolsBlock + kHermesTurns);
  // No system message: Qwen 2.5's default one heads the tools block.
  EXPECT_EQ(t.Render(std::span(messages).subspan(1), true, kTools),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.\n\n" +
                kHermesToolsBlock + kHermesTurns);
}

TEST(ChatToolsTest, Qwen3MatchesJinja) {
  const ChatTemplate t = DetectFile("Qwen-Qwen3-0.6B");
  EXPECT_EQ(t.tool_format(), ToolFormat::kHermes);
  const auto messages = Conversation("call_1");
  EXPECT_EQ(t.Render(messages, true, kTools),
            "<|im_start|>system\nYou are helpful.\n\n" + kHermesToolsBlock + kHermesTurns);
  // No system message and no default: the block starts with "# Tools".
  EXPECT_EQ(t.Render(std::span(messages).subspan(1), true, kTools),
            "<|im_start|>system\n" + kHermesToolsBlock + kHermesTurns);
}

TEST(ChatToolsTest, HermesGroupsResultsAndSeparatesCalls) {
  const ChatTemplate t = DetectFile("Qwen-Qwen3-0.6B");
  ChatMessage calls = Call("a", R"({"city": "Paris"})");
  calls.content = "Let me check.";
  calls.tool_calls.push_back({.id = "b", .name = "get_time", .arguments = "{}"});
  const std::vector<ChatMessage> messages = {
      {.role = "user", .content = "Weather and time?"}, calls, Result("a"), Result("b", "12:00")};
  EXPECT_EQ(t.Render(messages, false, kTools),
            "<|im_start|>system\n" + kHermesToolsBlock +
                "<|im_start|>user\nWeather and time?<|im_end|>\n"
                "<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
                "\"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
                "<tool_response>\n12:00\n</tool_response><|im_end|>\n");
}

TEST(ChatToolsTest, PlainChatMlUsesHermesOnlyWithTools) {
  // SmolLM2's template is plain ChatML: tools are written Hermes/Qwen style (no default system).
  const ChatTemplate t = ChatTemplate::ByName("chatml").value();
  EXPECT_EQ(t.tool_format(), ToolFormat::kHermes);
  const auto messages = Conversation("call_1");
  EXPECT_EQ(t.Render(messages, true, kTools),
            "<|im_start|>system\nYou are helpful.\n\n" + kHermesToolsBlock + kHermesTurns);
  // Without tools its own template writes a tool turn as any other role.
  const std::vector<ChatMessage> result = {Result("call_1", "21")};
  EXPECT_EQ(t.Render(result, false), "<|im_start|>tool\n21<|im_end|>\n");
}

TEST(ChatToolsTest, Llama31MatchesJinja) {
  for (const char* file : {"meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
                           "meta-llama-Llama-3.3-70B-Instruct"}) {
    ChatTemplate t = DetectFile(file);
    t.set_date("26 Jul 2024");
    EXPECT_EQ(t.tool_format(), ToolFormat::kLlama3) << file;
    const auto messages = Conversation("call_1");
    ASSERT_TRUE(t.CheckToolUse(messages, kTools).ok());
    EXPECT_EQ(t.Render(messages, true, kTools),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
              "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
              "2024\n\nYou are helpful.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please "
              "respond with a JSON for a function call with its proper arguments that best "
              "answers the given prompt.\n\nRespond in the format {\"name\": function name, "
              "\"parameters\": dictionary of argument name and its value}.Do not use "
              "variables.\n\n"
              "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
              "\"get_weather\",\n        \"description\": \"Get the weather\",\n        "
              "\"parameters\": {\n            \"type\": \"object\",\n            \"properties\": "
              "{\n                \"city\": {\n                    \"type\": \"string\"\n        "
              "        }\n            },\n            \"required\": [\n                \"city\"\n "
              "           ]\n        }\n    }\n}\n\n"
              "Weather in Paris?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
              "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
              "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n")
        << file;
    // The template raises on two calls in one turn.
    std::vector<ChatMessage> two = messages;
    two[2].tool_calls.push_back(two[2].tool_calls[0]);
    const Status refused = t.CheckToolUse(two, kTools);
    EXPECT_EQ(refused.message(),
              "'messages[2].tool_calls' holds 2 calls; Llama 3's template takes one call per turn");
  }
}

TEST(ChatToolsTest, MistralNemoMatchesJinja) {
  const ChatTemplate t = DetectFile("mistralai-Mistral-Nemo-Instruct-2407");
  EXPECT_EQ(t.tool_format(), ToolFormat::kMistral);
  std::vector<ChatMessage> messages = Conversation("abc123XYZ");
  messages.push_back({.role = "assistant", .content = "It is 21 C."});
  messages.push_back({.role = "user", .content = "Thanks!"});
  ASSERT_TRUE(t.CheckToolUse(messages, kTools).ok());
  EXPECT_EQ(t.Render(messages, true, kTools),
            "<s>[INST]Weather in Paris?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", "
            "\"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}]</s>"
            "[TOOL_RESULTS]{\"content\": {\"temp\": 21}, \"call_id\": "
            "\"abc123XYZ\"}[/TOOL_RESULTS]It is 21 C.</s>"
            "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
            "\"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", "
            "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
            "[\"city\"]}}}][/AVAILABLE_TOOLS][INST]You are helpful.\n\nThanks![/INST]");
  // The template raises on call ids that are not 9 characters long.
  const Status refused = t.CheckToolUse(Conversation("call_1"), kTools);
  EXPECT_EQ(refused.message(),
            "'messages[2].tool_calls[0].id' is 'call_1'; Mistral's template needs 9 characters");
}

TEST(ChatToolsTest, Granite4MatchesJinja) {
  const ChatTemplate t = DetectFile("ibm-granite-granite-4.0");
  EXPECT_EQ(t.name(), "granite");
  EXPECT_EQ(t.tool_format(), ToolFormat::kHermes);
  const std::string tools_text =
      "You are a helpful assistant with access to the following tools. You may call one or more "
      "tools to assist with the user query.\n\nYou are provided with function signatures within "
      "<tools></tools> XML tags:\n<tools>\n" +
      kToolJson +
      "\n</tools>\n\nFor each tool call, return a json object with function name and arguments "
      "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-json-object>}\n</tool_call>. If a tool does not exist in the provided "
      "list of tools, notify the user that you do not have the ability to fulfill the request.";
  const std::string turns =
      "<|start_of_role|>user<|end_of_role|>Weather in Paris?<|end_of_text|>\n"
      "<|start_of_role|>assistant<|end_of_role|><tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|end_of_text|>\n"
      "<|start_of_role|>user<|end_of_role|>\n<tool_response>\n{\"temp\": 21}\n"
      "</tool_response><|end_of_text|>\n"
      "<|start_of_role|>assistant<|end_of_role|>";
  const auto messages = Conversation("call_1");
  EXPECT_EQ(t.Render(messages, true, kTools),
            "<|start_of_role|>system<|end_of_role|>You are helpful.\n\n" + tools_text +
                "<|end_of_text|>\n" + turns);
  EXPECT_EQ(t.Render(std::span(messages).subspan(1), true, kTools),
            "<|start_of_role|>system<|end_of_role|>" + tools_text + "<|end_of_text|>\n" + turns);
  // Neither a system message nor tools: Granite's default system message.
  EXPECT_EQ(t.Render(std::span(messages).subspan(1, 1), true),
            "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure "
            "responses are professional, accurate, and safe.<|end_of_text|>\n"
            "<|start_of_role|>user<|end_of_role|>Weather in Paris?<|end_of_text|>\n"
            "<|start_of_role|>assistant<|end_of_role|>");
}

TEST(ChatToolsTest, Hermes3MatchesJinja) {
  ChatTemplate t = DetectFile("NousResearch-Hermes-3-Llama-3.1-8B-tool_use");
  EXPECT_EQ(t.name(), "chatml");
  t.set_special_tokens("<|begin_of_text|>", "<|eot_id|>");
  const std::vector<ChatTool> tools = {
      {.name = "get_weather",
       .json = R"({"type":"function","function":{"name":"get_weather","description":"Get the )"
               R"(weather","parameters":{"type":"object","properties":{"city":{"type":"string",)"
               R"("description":" The city "},"days":{"type":"array","items":{"type":"integer"}}},)"
               R"("required":["city"]}}})"}};
  // The template's own quirks: arrays are list[Union[]] (`items` is the dict filter), the Args
  // lines are not separated, and the tool's outer brace is never closed.
  const std::string system =
      "<|im_start|>system\nYou are a function calling AI model. You are provided with function "
      "signatures within <tools></tools> XML tags. You may call one or more functions to assist "
      "with the user query. Don't make assumptions about what values to plug into functions. "
      "Here are the available tools: <tools> {\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\", \"description\": \"get_weather(city: str, days: list[Union[]]) - Get the "
      "weather\n\n    Args:\n        city(str): The city        days(list[Union[]]): \", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
      "\"description\": \" The city \"}, \"days\": {\"type\": \"array\", \"items\": {\"type\": "
      "\"integer\"}}}, \"required\": [\"city\"]}} </tools>Use the following pydantic model json "
      "schema for each tool call you will make: {\"properties\": {\"name\": {\"title\": \"Name\", "
      "\"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": \"object\"}}, "
      "\"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": "
      "\"object\"}}\nFor each function call return a json object with function name and arguments "
      "within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-dict>}\n</tool_call><|im_end|>\n";
  std::vector<ChatMessage> messages = Conversation("call_1");
  messages[2].content = "Checking.";  // dropped: the template writes only the calls
  messages.push_back(Result("call_2", "sunny"));
  EXPECT_EQ(t.Render(messages, true, tools),
            "<|begin_of_text|>" + system +
                "<|im_start|>system\nYou are helpful.<|im_end|>\n"
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
                "<|im_start|>tool\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
                "<tool_response>\nsunny\n</tool_response><|im_end|>"
                "<|im_start|>assistant\n");
}

TEST(ChatToolsTest, OddToolJsonNeverThrows) {
  // What the server does not check (properties, return, items) can be anything.
  const std::vector<ChatTool> odd = {
      {.name = "a",
       .json = R"({"type":"function","function":{"name":"a","parameters":{"properties":5}}})"},
      {.name = "b",
       .json = R"({"type":"function","function":{"name":"b","return":"x","parameters":)"
               R"({"properties":{"p":3,"q":{"type":["string",7]},"r":{"type":"null"}}}}})"},
      {.name = "c", .json = "not json"},
      {.name = "d", .json = "[1,2]"}};
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  for (const char* file : {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "Qwen-Qwen3-0.6B",
                           "meta-llama-Llama-3.1-8B-Instruct",
                           "mistralai-Mistral-Nemo-Instruct-2407", "ibm-granite-granite-4.0"}) {
    const ChatTemplate t = DetectFile(file);
    std::string text;
    EXPECT_NO_THROW(text = t.Render(messages, true, odd)) << file;
    EXPECT_NE(text.find("Hi"), std::string::npos) << file;
  }
  const std::string hermes3 =
      DetectFile("NousResearch-Hermes-3-Llama-3.1-8B-tool_use").Render(messages, true, odd);
  EXPECT_NE(hermes3.find("b(p: Union[], q: Union[str,Any], r: Any) -> Union[] - "),
            std::string::npos)
      << hermes3;
}

// Qwen 3.5 and Qwen3-Coder: XML calls. The expected strings were worked out from the templates
// and checked against Jinja2 (trim_blocks, lstrip_blocks, Hugging Face's tojson).
const std::string kQwen35ToolsBlock =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n" +
    kToolJson +
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is no "
    "function call available, answer the question like normal with your current knowledge and do "
    "not tell the user about function calls\n</IMPORTANT>";

// Two calls in one turn: a string, a number and an object argument; a boolean, a float and null
// as Jinja's `string` filter prints them.
ChatMessage TwoXmlCalls(std::string content) {
  return ChatMessage{
      .role = "assistant",
      .content = std::move(content),
      .tool_calls = {{.id = "a",
                      .name = "get_weather",
                      .arguments = R"({"city":"Paris","days":3,"options":{"units":"metric",)"
                                   R"("hourly":true}})"},
                     {.id = "b",
                      .name = "get_time",
                      .arguments = R"({"zone":"Europe/Paris","utc":false,"offset":1.5,)"
                                   R"("dst":null})"}}};
}

const std::string kTwoXmlCallsText =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=options>\n{\"units\": \"metric\", \"hourly\": "
    "true}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
    "<parameter=zone>\nEurope/Paris\n</parameter>\n<parameter=utc>\nFalse\n</parameter>\n"
    "<parameter=offset>\n1.5\n</parameter>\n<parameter=dst>\nNone\n</parameter>\n</function>\n"
    "</tool_call>";

// --chat-template qwen3.5 / qwen3-coder (for a GGUF without the template, or another model in
// their format) render as the templates Detect recognizes, tools, calls, results and think blocks.
TEST(ChatToolsTest, QwenXmlVariantsByNameRenderAsTheirTemplates) {
  const std::vector<ChatMessage> messages = {
      {.role = "system", .content = "You are helpful."},
      {.role = "user", .content = "Weather and time in Paris?"},
      TwoXmlCalls("<think>\nI need both.\n</think>\n\nLet me check."),
      Result("a"),
      Result("b", "12:00")};
  const std::pair<const char*, const char*> variants[] = {{"qwen3.5", "Qwen3.5-4B"},
                                                          {"qwen3-coder", "Qwen3-Coder"}};
  for (const auto& [name, file] : variants) {
    auto by_name = ChatTemplate::ByName(name);
    ASSERT_TRUE(by_name.ok()) << by_name.message();
    const ChatTemplate detected = DetectFile(file);
    EXPECT_EQ(by_name->name(), name);
    EXPECT_EQ(detected.name(), name);
    EXPECT_EQ(by_name->tool_format(), ToolFormat::kQwenXml);
    EXPECT_EQ(by_name->prompt_opens_think(), detected.prompt_opens_think()) << name;
    EXPECT_EQ(by_name->knows_think(), detected.knows_think()) << name;
    for (bool cue : {false, true}) {
      EXPECT_EQ(by_name->Render(messages, cue, kTools), detected.Render(messages, cue, kTools))
          << name;
      EXPECT_EQ(by_name->Render(std::span(messages).subspan(1), cue),
                detected.Render(std::span(messages).subspan(1), cue))
          << name;
    }
  }
}

TEST(ChatToolsTest, Qwen35MatchesJinja) {
  const ChatTemplate t = DetectFile("Qwen3.5-4B");
  EXPECT_EQ(t.tool_format(), ToolFormat::kQwenXml);
  EXPECT_TRUE(t.prompt_opens_think());
  EXPECT_TRUE(t.knows_think());
  const std::vector<ChatMessage> messages = {
      {.role = "system", .content = "  You are helpful.\n"},
      {.role = "user", .content = "Weather and time in Paris?"},
      TwoXmlCalls("<think>\nI need both.\n</think>\n\nLet me check."),
      Result("a"),
      Result("b", "12:00"),
      {.role = "assistant", .content = "<think>\nBoth known.\n</think>\n\nIt is 21 C at noon."}};
  ASSERT_TRUE(t.CheckToolUse(messages, kTools).ok());
  EXPECT_EQ(t.Render(messages, true, kTools),
            kQwen35ToolsBlock +
                "\n\nYou are helpful.<|im_end|>\n"
                "<|im_start|>user\nWeather and time in Paris?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nI need both.\n</think>\n\nLet me check.\n\n" +
                kTwoXmlCallsText +
                "<|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
                "<tool_response>\n12:00\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n<think>\nBoth known.\n</think>\n\nIt is 21 C at "
                "noon.<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // No system message: the tools turn ends after the instructions.
  const std::vector<ChatMessage> no_system = {{.role = "user", .content = "Hi"}};
  EXPECT_EQ(t.Render(no_system, true, kTools),
            kQwen35ToolsBlock +
                "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

// Reasoning is dropped before the last user query and written (empty when there was none) after
// it; a user turn that is only a <tool_response> block is not a query.
TEST(ChatToolsTest, Qwen35ThinkBlocksAfterTheLastQueryOnly) {
  const ChatTemplate t = DetectFile("Qwen3.5-4B");
  const std::vector<ChatMessage> messages = {
      {.role = "user", .content = "Hi"},
      {.role = "assistant", .content = "<think>\nGreeting.\n</think>\n\nHello!"},
      {.role = "user", .content = "Weather?"},
      Call("a"),
      {.role = "user", .content = "<tool_response>\nsunny\n</tool_response>"},
      {.role = "assistant", .content = "Sunny."}};
  EXPECT_EQ(t.Render(messages, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n"
            "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nSunny.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
}

const std::vector<ChatTool> kCoderTools = {
    {.name = "get_weather",
     .json = R"({"type":"function","function":{"name":"get_weather","description":"  Get the )"
             R"(weather\n","parameters":{"type":"object","properties":{"city":{"type":"string",)"
             R"("description":"The city"},"days":{"type":["integer","null"],"minimum":1},)"
             R"("options":{"type":"object","properties":{"units":{"enum":["metric",)"
             R"("imperial"]}}}},"required":["city"],"additionalProperties":false},)"
             R"("strict":true}})"},
    {.name = "get_time", .json = R"({"type":"function","function":{"name":"get_time"}})"},
};

const std::string kCoderToolsBlock =
    "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>\n<function>\n"
    "<name>get_weather</name>\n<description>Get the weather</description>\n<parameters>\n"
    "<parameter>\n<name>city</name>\n<type>string</type>\n<description>The city</description>\n"
    "</parameter>\n<parameter>\n<name>days</name>\n<type>['integer', 'null']</type>\n"
    "<minimum>1</minimum>\n</parameter>\n<parameter>\n<name>options</name>\n<type>object</type>\n"
    "<properties>{\"units\": {\"enum\": [\"metric\", \"imperial\"]}}</properties>\n</parameter>\n"
    "<required>[\"city\"]</required>\n<additionalProperties>False</additionalProperties>\n"
    "</parameters>\n<strict>True</strict>\n</function>\n<function>\n<name>get_time</name>\n"
    "<parameters>\n</parameters>\n</function>\n</tools>\n\nIf you choose to call a tool ONLY "
    "reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: the tool calling "
    "block MUST begin with an opening <tool_call> tag and end with a closing </tool_call> tag.\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is no "
    "function call available, answer the question like normal with your current knowledge and do "
    "not tell the user about function calls\n</IMPORTANT><|im_end|>\n";

TEST(ChatToolsTest, Qwen3CoderMatchesJinja) {
  const ChatTemplate t = DetectFile("Qwen3-Coder");
  EXPECT_EQ(t.tool_format(), ToolFormat::kQwenXml);
  EXPECT_FALSE(t.prompt_opens_think());
  ChatMessage calls = TwoXmlCalls(" Let me check. ");
  calls.tool_calls[0].arguments = R"({"city":"Paris","days":3,"options":{"units":"metric"}})";
  calls.tool_calls[1].arguments = R"({"zone":"Europe/Paris","utc":true})";
  const std::vector<ChatMessage> messages = {
      {.role = "user", .content = "Weather and time in Paris?"},
      calls,
      Result("a"),
      Result("b", "12:00"),
      {.role = "assistant", .content = "It is 21 C at noon."}};
  ASSERT_TRUE(t.CheckToolUse(messages, kCoderTools).ok());
  // No system message: the template's default one heads the tools.
  EXPECT_EQ(t.Render(messages, true, kCoderTools),
            "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a "
            "computer to solve tasks." +
                kCoderToolsBlock +
                "<|im_start|>user\nWeather and time in Paris?<|im_end|>\n"
                "<|im_start|>assistant\nLet me check.\n\n<tool_call>\n<function=get_weather>\n"
                "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                "<parameter=options>\n{\"units\": \"metric\"}\n</parameter>\n</function>\n"
                "</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=zone>\nEurope/Paris\n"
                "</parameter>\n<parameter=utc>\nTrue\n</parameter>\n</function>\n</tool_call>"
                "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
                "<tool_response>\n12:00\n</tool_response>\n<|im_end|>\n"
                "<|im_start|>assistant\nIt is 21 C at noon.<|im_end|>\n<|im_start|>assistant\n");
  // A system message as it is (not trimmed); without tools no tools block; a call without text.
  const std::vector<ChatMessage> plain = {{.role = "system", .content = "Be brief. "},
                                          {.role = "user", .content = "Weather?"},
                                          Call("a"),
                                          Result("a", "sunny")};
  EXPECT_EQ(t.Render(plain, false),
            "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
            "</parameter>\n</function>\n</tool_call><|im_end|>\n<|im_start|>user\n"
            "<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n");
}

TEST(ChatToolsTest, FamiliesWithoutToolsAreRefusedByName) {
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  for (const char* name : {"llama2", "zephyr", "gemma", "phi3", "deepseek-r1", "plain"}) {
    const ChatTemplate t = ChatTemplate::ByName(name).value();
    EXPECT_EQ(t.tool_format(), ToolFormat::kNone) << name;
    EXPECT_EQ(
        t.CheckToolUse(messages, kTools).message(),
        "'tools': the chat template family '" + std::string(name) + "' has no tool-call format");
    EXPECT_TRUE(t.CheckToolUse(messages, {}).ok()) << name;
  }
  EXPECT_EQ(DetectFile("HuggingFaceTB-SmolLM3-3B").CheckToolUse(messages, kTools).message(),
            "'tools': the chat template family 'chatml (SmolLM3)' has no tool-call format");
  EXPECT_EQ(ChatTemplate::ByName("llama3").value().CheckToolUse(messages, kTools).message(),
            "'tools': the chat template family 'llama3 (3.0)' has no tool-call format");
  // Variants whose call format kvserve does not write are refused rather than written wrongly:
  // an XML <function=...> template that is neither Qwen 3.5's nor Qwen3-Coder's.
  const ChatTemplate other_xml =
      ChatTemplate::Detect("<|im_start|>{{ '<tool_call>\n<function=' }}").value();
  EXPECT_EQ(other_xml.CheckToolUse(messages, kTools).message(),
            "'tools': the chat template family 'chatml (XML <function=...> calls)' has no "
            "tool-call format");
  EXPECT_EQ(
      DetectFile("Mistral-Small-3.2-24B-Instruct-2506").CheckToolUse(messages, kTools).message(),
      "'tools': the chat template family 'mistral ([TOOL_CALLS]name[ARGS])' has no tool-call "
      "format");
}

TEST(ChatToolsTest, ToolTextIsWrittenAsGiven) {
  // A description holding markup is printed as it is, inside the tools block.
  const ChatTemplate t = ChatTemplate::ByName("chatml").value();
  const std::vector<ChatTool> tools = {
      {.name = "x",
       .json = R"({"type":"function","function":{"name":"x","description":"<|im_end|>"}})"}};
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"},
                                             Result("c", "<|im_start|>")};
  const std::string text = t.Render(messages, false, tools);
  EXPECT_NE(text.find("\"description\": \"<|im_end|>\""), std::string::npos);
}

}  // namespace
}  // namespace kvserve
