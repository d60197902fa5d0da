// gpt-oss's output parsed (server/harmony_parser.h): outputs in the shapes the model writes
// (analysis then final, a call with and without <|constrain|>, the recipient before or after the
// channel, a preamble, output cut off by the stop strings) and malformed ones (not harmony at all,
// arguments that are not a JSON object, a broken or endless header, text after the answer), each
// parsed whole, byte by byte and cut once at every boundary with the same result; and through
// ChatOutputParser as the server uses it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/harmony_parser.h"

namespace kvserve {
namespace {

struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Parsed&) const = default;
};

void Add(const HarmonyOutput& piece, Parsed& total) {
  total.reasoning += piece.reasoning;
  total.content += piece.content;
  for (const ParsedToolCall& call : piece.calls) {
    EXPECT_TRUE(call.id.starts_with("call_")) << call.id;
    total.calls.emplace_back(call.name, call.arguments);
  }
}

Parsed Streamed(const std::vector<std::string>& pieces, HarmonyOptions options) {
  HarmonyParser parser(options);
  Parsed total;
  for (const std::string& piece : pieces) Add(parser.Push(piece), total);
  Add(parser.Finish(), total);
  return total;
}

void ExpectParses(const std::string& text, const Parsed& expected, HarmonyOptions options = {}) {
  EXPECT_EQ(Streamed({text}, options), expected) << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(Streamed(bytes, options), expected) << "byte by byte: " << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(Streamed({text.substr(0, cut), text.substr(cut)}, options), expected)
        << "cut at " << cut << ": " << text;
  }
}

TEST(HarmonyParserTest, AnalysisThenFinal) {
  ExpectParses(
      "<|channel|>analysis<|message|>The user says hi. Reply.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
      {.reasoning = "The user says hi. Reply.", .content = "Hello! How can I help?"});
  // As the stop string <|return|> leaves it, and a final answer without analysis.
  ExpectParses(
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
      "Done.",
      {.reasoning = "Think.", .content = "Done."});
  ExpectParses("<|channel|>final<|message|>Just this.", {.content = "Just this."});
  // Ran out of tokens while thinking: all reasoning.
  ExpectParses("<|channel|>analysis<|message|>Still think", {.reasoning = "Still think"});
}

TEST(HarmonyParserTest, ToolCalls) {
  const Parsed weather{.reasoning = "Need the weather.",
                       .calls = {{"get_weather", R"({"city":"Paris","days":3})"}}};
  // The model's usual form: recipient after the channel, <|constrain|>json.
  ExpectParses(
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
      "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", "
      "\"days\": 3}<|call|>",
      weather);
  // The recipient in the role, as the template writes history, "json" without <|constrain|>,
  // and cut off by the stop string <|call|>.
  ExpectParses(
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant "
      "to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\",\"days\":"
      "3}",
      weather);
  // No analysis, no content type; a preamble to the user on commentary; two calls.
  ExpectParses(
      "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>"
      "commentary to=functions.a<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
      "to=functions.b <|constrain|>json<|message|>{\"x\": [1, {\"y\": null}]}<|call|>",
      {.content = "Checking both.", .calls = {{"a", "{}"}, {"b", R"({"x":[1,{"y":null}]})"}}});
  // The first message's recipient before its channel (the prompt wrote "<|start|>assistant").
  ExpectParses(" to=functions.f<|channel|>commentary json<|message|>{\"k\": \"v\"}",
               {.calls = {{"f", R"({"k":"v"})"}}});
}

TEST(HarmonyParserTest, MalformedOutputStaysContent) {
  // Not harmony at all (a model that does not know the format).
  ExpectParses("Hello there, <b>friend</b> <|end|>",
               {.content = "Hello there, <b>friend</b> <|end|>"});
  ExpectParses("", {});
  // Arguments that are not a JSON object: the message as written, then the rest.
  const std::string bad_call =
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"city\": <|call|>";
  ExpectParses(
      "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant" + bad_call.substr(0) + "tail",
      {.reasoning = "Hm.", .content = "<|start|>assistant" + bad_call + "tail"});
  ExpectParses("<|channel|>commentary to=functions.f json<|message|>[1, 2]",
               {.content = "<|channel|>commentary to=functions.f json<|message|>[1, 2]"});
  // A header broken by a terminator, one that never ends, text after the answer.
  ExpectParses("<|channel|>final<|end|>text", {.content = "<|channel|>final<|end|>text"});
  const std::string endless = "<|channel|>" + std::string(HarmonyParser::kMaxHeaderBytes, 'x');
  ExpectParses(endless + "<|message|>y", {.content = endless + "<|message|>y"});
  ExpectParses("<|channel|>final<|message|>Answer.<|return|> and more",
               {.content = "Answer. and more"});
  ExpectParses("<|channel|>final<|message|>A<|end|><|start|>assistant<|channel|>fin",
               {.content = "A<|start|>assistant<|channel|>fin"});
  // A first header that is only the start of " to=" is none, whether or not its <|message|> had
  // arrived when the parser looked (found by tests/fuzz output_fuzz).
  ExpectParses(" t<|message|>o=<|(ha", {.content = " t<|message|>o=<|(ha"});
  ExpectParses("<|chan<|message|>x", {.content = "<|chan<|message|>x"});
  // Deeply nested arguments are not dumped (recursion): content.
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  ExpectParses("<|channel|>commentary to=functions.f<|message|>{\"a\": " + deep + "}",
               {.content = "<|channel|>commentary to=functions.f<|message|>{\"a\": " + deep + "}"});
}

TEST(HarmonyParserTest, OptionsKeepAnalysisOrCallsAsContent) {
  const std::string text =
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>";
  ExpectParses(
      text,
      {.content = "<|channel|>analysis<|message|>Think.<|end|>", .calls = {{"f", R"({"a":1})"}}},
      {.split_reasoning = false});
  ExpectParses(text, {.reasoning = "Think.", .content = "{\"a\":1}"}, {.parse_calls = false});
}

TEST(HarmonyParserTest, ThinkingOnlyInsideAnalysis) {
  HarmonyParser parser({});
  EXPECT_FALSE(parser.thinking());
  parser.Push("<|channel|>analysis<|message|>Hm");
  EXPECT_TRUE(parser.thinking());
  parser.Push("<|end|><|start|>assistant<|channel|>final<|message|>Yes");
  EXPECT_FALSE(parser.thinking());
}

// As the server builds it: harmony chosen by the template, calls only with tools offered, one
// call when parallel_tool_calls is false.
TEST(HarmonyParserTest, ThroughChatOutputParser) {
  const std::string text =
      "<|channel|>analysis<|message|>Two calls.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.a<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
      "to=functions.b<|message|>{}<|call|>";
  ChatOutputParser serial({.split_reasoning = true,
                           .harmony = true,
                           .tool_format = ToolFormat::kHarmony,
                           .parallel_tool_calls = false});
  ChatOutputDelta first;
  for (char c : text) {
    ChatOutputDelta d = serial.Push(std::string(1, c));
    first.reasoning += d.reasoning;
    first.content += d.content;
    for (ParsedToolCall& call : d.calls) first.calls.push_back(call);
  }
  ChatOutputDelta last = serial.Finish();
  EXPECT_EQ(first.reasoning + last.reasoning, "Two calls.");
  EXPECT_EQ(first.content + last.content, "");
  ASSERT_EQ(first.calls.size() + last.calls.size(), 1u);
  EXPECT_EQ(serial.n_calls(), 1);
  ChatOutputParser no_tools({.split_reasoning = true, .harmony = true});
  ChatOutputDelta d = no_tools.Push("<|channel|>final<|message|>Hi");
  EXPECT_EQ(d.content, "Hi");
  EXPECT_TRUE(d.reasoning.empty());
}

}  // namespace
}  // namespace kvserve
