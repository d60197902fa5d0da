// Tool-call parsing and reasoning splitting of model output: per family on hand-written outputs in
// the shapes the models produce (Hermes/Qwen <tool_call>, Llama 3 JSON and <|python_tag|>,
// Mistral [TOOL_CALLS]), malformed ones kept as content, and every output streamed byte by byte
// and cut at every boundary giving what it gives whole.
#include <gtest/gtest.h>

#include <cctype>
#include <span>
#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/reasoning_splitter.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tool_prompt.h"

namespace kvserve {
namespace {

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

Expected Flatten(const ToolCallOutput& out) {
  Expected e{.content = out.content};
  for (const ParsedToolCall& call : out.calls) e.calls.emplace_back(call.name, call.arguments);
  return e;
}

void Append(const ToolCallOutput& piece, ToolCallOutput& total) {
  total.content += piece.content;
  total.calls.insert(total.calls.end(), piece.calls.begin(), piece.calls.end());
}

// The output pushed in the given pieces.
ToolCallOutput Streamed(ToolFormat format, const std::vector<std::string>& pieces,
                        std::span<const ChatTool> tools = {}) {
  ToolCallParser parser(format, tools);
  ToolCallOutput total;
  for (const std::string& piece : pieces) Append(parser.Push(piece), total);
  Append(parser.Finish(), total);
  return total;
}

// Whole, byte by byte and cut once at every boundary: the same content and calls.
void ExpectParses(ToolFormat format, const std::string& text, const Expected& expected,
                  std::span<const ChatTool> tools = {}) {
  const Expected whole = Flatten(ToolCallParser::ParseAll(format, text, tools));
  EXPECT_EQ(whole.content, expected.content) << text;
  EXPECT_EQ(whole.calls, expected.calls) << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const Expected by_byte = Flatten(Streamed(format, bytes, tools));
  EXPECT_EQ(by_byte.content, expected.content) << "byte by byte: " << text;
  EXPECT_EQ(by_byte.calls, expected.calls) << "byte by byte: " << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Expected split =
        Flatten(Streamed(format, {text.substr(0, cut), text.substr(cut)}, tools));
    EXPECT_EQ(split.content, expected.content) << "cut at " << cut << ": " << text;
    EXPECT_EQ(split.calls, expected.calls) << "cut at " << cut << ": " << text;
  }
}

TEST(ToolCallParserTest, HermesCalls) {
  ExpectParses(ToolFormat::kHermes,
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
               "</tool_call>",
               {"", {{"get_weather", R"({"city":"Paris"})"}}});
  // Qwen 2.5 style: text, then two calls; the whitespace between them is not content.
  ExpectParses(
      ToolFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>\n",
      {"Let me check.", {{"get_weather", R"({"city":"Paris","unit":"c"})"}, {"get_time", "{}"}}});
  // Arguments given as a string holding JSON, and none at all.
  ExpectParses(ToolFormat::kHermes,
               R"(<tool_call>{"name": "f", "arguments": "{\"a\": [1, 2]}"}</tool_call>)"
               R"(<tool_call>{"name": "g"}</tool_call>)",
               {"", {{"f", R"({"a":[1,2]})"}, {"g", "{}"}}});
}

TEST(ToolCallParserTest, HermesMalformedIsContent) {
  for (const std::string& text : {
           std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\""),
           std::string("<tool_call>{name: get_weather}</tool_call>"),
           std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
           std::string("<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"),
           std::string("I like <tools> and <tool_call"),
           std::string("Plain text, no calls.\n\n"),
       }) {
    ExpectParses(ToolFormat::kHermes, text, {text, {}});
  }
  // A bad call between good text stays in place.
  ExpectParses(ToolFormat::kHermes, "A <tool_call>oops</tool_call> B",
               {"A <tool_call>oops</tool_call> B", {}});
}

TEST(ToolCallParserTest, DeepNestingIsContentNotACrash) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string text =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}</tool_call>";
  EXPECT_EQ(ToolCallParser::ParseAll(ToolFormat::kHermes, text).content, text);
  const std::string quoted =
      "<tool_call>{\"name\": \"f\", \"arguments\": \"" + deep + "\"}</tool_call>";
  EXPECT_EQ(ToolCallParser::ParseAll(ToolFormat::kHermes, quoted).content, quoted);
  EXPECT_EQ(ToolCallParser::ParseAll(ToolFormat::kMistral, "[TOOL_CALLS]" + deep).content,
            "[TOOL_CALLS]" + deep);
}

TEST(ToolCallParserTest, Llama3Calls) {
  ExpectParses(ToolFormat::kLlama3,
               "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
               {"", {{"get_weather", R"({"city":"Paris"})"}}});
  ExpectParses(ToolFormat::kLlama3,
               "<|python_tag|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
               {"", {{"get_weather", R"({"city":"Paris"})"}}});
  ExpectParses(ToolFormat::kLlama3,
               " {\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {\"x\": "
               "\"}{\"}}",
               {"", {{"a", "{}"}, {"b", R"({"x":"}{"})"}}});
}

TEST(ToolCallParserTest, Llama3MalformedIsContent) {
  for (const std::string& text : {
           std::string("The weather in Paris is sunny."),
           std::string("{\"name\": \"get_weather\", \"parameters\": {\"city\": "),
           std::string("{not a call}"),
           std::string("  {\"a\": 1}"),
           std::string("<|python_tag|>print(1)"),
           std::string("<|python"),
       }) {
    ExpectParses(ToolFormat::kLlama3, text, {text, {}});
  }
  // Text first: Llama 3 answered in prose, so a later brace is prose too.
  ExpectParses(ToolFormat::kLlama3, "Sure: {\"name\": \"f\", \"parameters\": {}}",
               {"Sure: {\"name\": \"f\", \"parameters\": {}}", {}});
}

TEST(ToolCallParserTest, MistralCalls) {
  ExpectParses(ToolFormat::kMistral,
               "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
               "{\"name\": \"get_time\", \"arguments\": {}}]",
               {"", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}});
  for (const std::string& text :
       {std::string("[TOOL_CALLS] not json"), std::string("Hello [TOOL_CALLS][{\"name\": "),
        std::string("[TOOL_CALLS][{\"name\": \"f\"}, 3]")}) {
    ExpectParses(ToolFormat::kMistral, text, {text, {}});
  }
}

// Qwen 3.5 / Qwen3-Coder: the schemas say which parameters are strings.
const std::vector<ChatTool> kXmlTools = {
    {"get_weather",
     R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
       "options": {"type": "object"}, "unit": {"enum": ["c", "f"]},
       "note": {"type": ["string", "null"]}}}}})"},
    {"run", R"({"type": "function", "function": {"name": "run", "parameters": {"type": "object",
       "properties": {"code": {"type": "string"}, "flag": {"type": "boolean"}}}}})"},
};

TEST(ToolCallParserTest, QwenXmlCalls) {
  // Qwen3-Coder style: text, then two calls; a string, a number and an object.
  ExpectParses(ToolFormat::kQwenXml,
               "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
               "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=options>\n"
               "{\"units\": \"metric\", \"hourly\": true}\n</parameter>\n</function>\n"
               "</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
               {"Let me check.",
                {{"get_weather", R"({"city":"Paris","days":3,"options":{"units":"metric",)"
                                 R"("hourly":true}})"},
                 {"get_time", "{}"}}},
               kXmlTools);
  // A string parameter stays text even when it reads as JSON; one newline on each side goes,
  // the others stay; "True"/"None" (as the templates print Python values) are JSON elsewhere.
  ExpectParses(ToolFormat::kQwenXml,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
               "<parameter=note>\nnull\n</parameter>\n<parameter=unit>\nc\n</parameter>\n"
               "</function>\n<function=run>\n<parameter=code>\n\ndef f():\n    return \"<x>\"\n\n"
               "</parameter>\n<parameter=flag>\nTrue\n</parameter>\n</function>\n</tool_call>",
               {"",
                {{"get_weather", R"({"city":"42","note":"null","unit":"c"})"},
                 {"run", R"({"code":"\ndef f():\n    return \"<x>\"\n","flag":true})"}}},
               kXmlTools);
  // Without the schemas (or for a tool or parameter they do not name): JSON when it parses.
  const std::string text =
      "<tool_call><function=f><parameter=a>42</parameter><parameter=b>\n[1, 2]\n</parameter>"
      "<parameter=c>\nhello world\n</parameter><parameter=d>\nNone\n</parameter>"
      "<parameter=e>\n\"quoted\"\n</parameter></function></tool_call>";
  ExpectParses(ToolFormat::kQwenXml, text,
               {"", {{"f", R"({"a":42,"b":[1,2],"c":"hello world","d":null,"e":"quoted"})"}}});
  ExpectParses(ToolFormat::kQwenXml, text,
               {"", {{"f", R"({"a":42,"b":[1,2],"c":"hello world","d":null,"e":"quoted"})"}}},
               kXmlTools);
}

TEST(ToolCallParserTest, QwenXmlMalformedIsContent) {
  for (const std::string& text : {
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis"),
           std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>"),
           std::string("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>"),
           std::string("<tool_call>\n<function=>\n</function>\n</tool_call>"),
           std::string("<tool_call>\n<function=f\n</function>\n</tool_call>"),
           std::string("<tool_call>\n<function=f>\n</function>\ntrailing\n</tool_call>"),
           std::string("<tool_call>\n<function=f>\nloose text\n</function>\n</tool_call>"),
           std::string("<tool_call>\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"),
           std::string("<function=f>\n</function>"),  // outside <tool_call>: text
           std::string("I like <tool_call"),
       }) {
    ExpectParses(ToolFormat::kQwenXml, text, {text, {}}, kXmlTools);
  }
  ExpectParses(ToolFormat::kQwenXml, "A <tool_call>oops</tool_call> B",
               {"A <tool_call>oops</tool_call> B", {}});
  // Too deep to parse as JSON: the text, as a string (no recursion, no crash).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const ToolCallOutput parsed =
      ToolCallParser::ParseAll(ToolFormat::kQwenXml, "<tool_call><function=f><parameter=a>" + deep +
                                                         "</parameter></function></tool_call>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, "{\"a\":\"" + deep + "\"}");
}

// What the prompt writes for a call (tokenizer/tool_prompt.h) parses back into that call.
TEST(ToolCallParserTest, QwenXmlRenderedCallsParseBack) {
  for (const std::string& arguments : {
           std::string(R"({"city":"New\nYork","days":3,"options":{"a":[1,{"b":null}]}})"),
           std::string(R"({"city":"","note":"  spaced  ","unit":"f"})"),
           std::string(R"({"city":"{\"not\": \"json here\"}","days":-2.5})"),
       }) {
    ChatText prompt;
    AppendQwenXmlToolCall({.id = "x", .name = "get_weather", .arguments = arguments}, prompt);
    const ToolCallOutput parsed =
        ToolCallParser::ParseAll(ToolFormat::kQwenXml, prompt.text(), kXmlTools);
    ASSERT_EQ(parsed.calls.size(), 1u) << prompt.text();
    EXPECT_EQ(parsed.content, "");
    EXPECT_EQ(parsed.calls[0].arguments, arguments) << prompt.text();
  }
  // Booleans and null come back from the template's Python spelling.
  ChatText prompt;
  AppendQwenXmlToolCall({.name = "run", .arguments = R"({"flag":false,"other":null})"}, prompt);
  EXPECT_EQ(ToolCallParser::ParseAll(ToolFormat::kQwenXml, prompt.text(), kXmlTools)
                .calls.at(0)
                .arguments,
            R"({"flag":false,"other":null})");
}

TEST(ToolCallParserTest, IdsAreFreshAndShapedPerFamily) {
  const ToolCallOutput two = ToolCallParser::ParseAll(
      ToolFormat::kHermes,
      "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(two.calls[0].id.size(), 29u);
  EXPECT_NE(two.calls[0].id, two.calls[1].id);
  const std::string mistral = NewToolCallId(ToolFormat::kMistral);
  EXPECT_EQ(mistral.size(), 9u);
  for (char c : mistral) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << mistral;
}

ReasoningOutput Split(bool starts_inside, const std::vector<std::string>& pieces) {
  ReasoningSplitter splitter(starts_inside);
  ReasoningOutput total;
  for (const std::string& piece : pieces) {
    ReasoningOutput out = splitter.Push(piece);
    total.reasoning += out.reasoning;
    total.content += out.content;
  }
  ReasoningOutput out = splitter.Finish();
  total.reasoning += out.reasoning;
  total.content += out.content;
  return total;
}

void ExpectSplits(bool starts_inside, const std::string& text, const std::string& reasoning,
                  const std::string& content) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const ReasoningOutput out = Split(starts_inside, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(out.reasoning, reasoning) << "cut at " << cut << ": " << text;
    EXPECT_EQ(out.content, content) << "cut at " << cut << ": " << text;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const ReasoningOutput out = Split(starts_inside, bytes);
  EXPECT_EQ(out.reasoning, reasoning) << text;
  EXPECT_EQ(out.content, content) << text;
}

TEST(ReasoningSplitterTest, SplitsThinkBlocks) {
  // Qwen 3: the block opens the reply.
  ExpectSplits(false, "<think>\nThe user greets me.\n\nI greet back.\n</think>\n\nHello!",
               "The user greets me.\n\nI greet back.", "Hello!");
  // DeepSeek-R1: the prompt opened the block.
  ExpectSplits(true, "Two and two.\n</think>\n\n4", "Two and two.", "4");
  // Out of tokens inside the block: all reasoning.
  ExpectSplits(false, "<think>\nhmm, let me", "hmm, let me", "");
  // No block: the output is content, untouched (a later tag included).
  ExpectSplits(false, "  Hello <think>x</think>", "", "  Hello <think>x</think>");
  ExpectSplits(false, "<thin", "", "<thin");
  ExpectSplits(false, "", "", "");
}

// `text` pushed one byte at a time, then Finish: everything the parser gave, together.
ChatOutputDelta PushByteByByte(ChatOutputParser& parser, std::string_view text) {
  ChatOutputDelta total;
  auto add = [&](const ChatOutputDelta& d) {
    total.reasoning += d.reasoning;
    total.content += d.content;
    total.calls.insert(total.calls.end(), d.calls.begin(), d.calls.end());
  };
  for (char c : text) add(parser.Push(std::string(1, c)));
  add(parser.Finish());
  return total;
}

TEST(ChatOutputTest, ReasoningThenToolCall) {
  ChatOutputParser parser({.split_reasoning = true, .tool_format = ToolFormat::kHermes});
  const std::string text =
      "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const ChatOutputDelta total = PushByteByByte(parser, text);
  EXPECT_EQ(total.reasoning, "I need the weather.");
  EXPECT_EQ(total.content, "");
  ASSERT_EQ(total.calls.size(), 1u);
  EXPECT_EQ(parser.n_calls(), 1);
}

// Qwen 3.5: the prompt opens <think>, so the answer starts inside it; the schemas reach the
// tool parser through the options.
TEST(ChatOutputTest, Qwen35ReasoningThenXmlCall) {
  ChatOutputParser parser({.split_reasoning = true,
                           .prompt_opens_think = true,
                           .tool_format = ToolFormat::kQwenXml,
                           .tools = kXmlTools});
  const std::string text =
      "I need the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
      "1984\n</parameter>\n</function>\n</tool_call>";
  const ChatOutputDelta total = PushByteByByte(parser, text);
  EXPECT_EQ(total.reasoning, "I need the weather.");
  EXPECT_EQ(total.content, "");
  ASSERT_EQ(total.calls.size(), 1u);
  EXPECT_EQ(total.calls[0].arguments, R"({"city":"1984"})");
}

TEST(ChatOutputTest, SingleCallWhenNotParallelAndNoParsingWithoutTools) {
  const std::string two =
      "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>";
  ChatOutputParser single({.tool_format = ToolFormat::kHermes, .parallel_tool_calls = false});
  ChatOutputDelta d = single.Push(two);
  ChatOutputDelta last = single.Finish();
  ASSERT_EQ(d.calls.size() + last.calls.size(), 1u);
  EXPECT_EQ(d.calls.empty() ? last.calls[0].name : d.calls[0].name, "a");
  ChatOutputParser none({});
  EXPECT_EQ(none.Push(two).content, two);  // tool_choice "none" / no tools: text as it is
  EXPECT_EQ(none.n_calls(), 0);
}

}  // namespace
}  // namespace kvserve
