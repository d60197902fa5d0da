// Gemma 4's output parsed (server/gemma4_parser.h, gemma4_arguments.h): outputs in the shapes the
// model writes (an answer alone after the cue's empty thought, a thought block then the answer,
// calls with every kind of argument, several calls, a call after a thought block, output cut off
// by the stop strings) and malformed ones (calls that do not parse or never close, stray channel
// markers, an unclosed thought block), each parsed whole, byte by byte and cut once at every
// boundary with the same result; the options off; and through ChatOutputParser as the server uses
// it.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/gemma4_arguments.h"
#include "server/gemma4_parser.h"

namespace kvserve {
namespace {

struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Parsed&) const = default;
};

void PrintTo(const Parsed& p, std::ostream* os) {
  *os << "{reasoning: \"" << p.reasoning << "\", content: \"" << p.content << "\", calls:";
  for (const auto& [name, arguments] : p.calls) *os << " " << name << arguments;
  *os << "}";
}

void Add(const Gemma4Output& piece, Parsed& total) {
  total.reasoning += piece.reasoning;
  total.content += piece.content;
  for (const ParsedToolCall& call : piece.calls) {
    EXPECT_TRUE(call.id.starts_with("call_")) << call.id;
    total.calls.emplace_back(call.name, call.arguments);
  }
}

Parsed Streamed(const std::vector<std::string>& pieces, Gemma4Options options) {
  Gemma4Parser parser(options);
  Parsed total;
  for (const std::string& piece : pieces) Add(parser.Push(piece), total);
  Add(parser.Finish(), total);
  return total;
}

void ExpectParses(const std::string& text, const Parsed& expected, Gemma4Options options = {}) {
  EXPECT_EQ(Streamed({text}, options), expected) << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(Streamed(bytes, options), expected) << "byte by byte: " << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(Streamed({text.substr(0, cut), text.substr(cut)}, options), expected)
        << "cut at " << cut << ": " << text;
  }
}

TEST(Gemma4ArgumentsTest, GemmasSyntaxAsJson) {
  const std::pair<std::string, std::string> cases[] = {
      {"{}", "{}"},
      {"{city:<|\"|>Paris<|\"|>}", R"({"city":"Paris"})"},
      // As the template writes every kind of value (keys keep the model's order).
      {"{Alpha:<|\"|>line1\nline2 \"q\"<|\"|>,big:1e+20,count:42,empty:{},empty_list:[],"
       "list:[1,<|\"|>two<|\"|>,[3],{k:<|\"|>v<|\"|>}],neg:-7,nested:{a:<|\"|>é<|\"|>,b:{c:[true,"
       "None]}},off:false,on:true,ratio:0.1,tiny:1e-05,whole:3.0}",
       R"({"Alpha":"line1\nline2 \"q\"","big":1e+20,"count":42,"empty":{},"empty_list":[],)"
       R"("list":[1,"two",[3],{"k":"v"}],"neg":-7,"nested":{"a":"é","b":{"c":[true,null]}},)"
       R"("off":false,"on":true,"ratio":0.1,"tiny":1e-05,"whole":3.0})"},
      // Whitespace between the parts, quoted keys, null, text with Gemma's markers and braces.
      {" { a : 1 , <|\"|>b c<|\"|>: [ null , 2 ] ,d:<|\"|>{x:<tool_call|>}<|\"|> } ",
       R"({"a":1,"b c":[null,2],"d":"{x:<tool_call|>}"})"},
  };
  for (const auto& [text, json] : cases) {
    auto parsed = Gemma4ArgumentsJson(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, json) << text;
  }
  const std::string malformed[] = {"",
                                   "[1]",
                                   "{a}",
                                   "{:1}",
                                   "{a:Paris}",
                                   "{a:<|\"|>open}",
                                   "{a:1,}",
                                   "{a:1 b:2}",
                                   "{a:1}}",
                                   "{a:[1,2}",
                                   "{a:1e}",
                                   "{a:tru}",
                                   "{\"a\":1} tail",
                                   std::string(100, '{')};
  for (const std::string& text : malformed) {
    EXPECT_FALSE(Gemma4ArgumentsJson(text).has_value()) << text;
  }
  std::string deep;  // nested past kMaxJinjaJsonDepth: refused, not recursed into
  for (int i = 0; i < 100; ++i) deep += "{a:";
  deep += "1" + std::string(100, '}');
  EXPECT_FALSE(Gemma4ArgumentsJson(deep).has_value());
}

TEST(Gemma4ParserTest, AnswersAndThoughts) {
  // Thinking off: the cue closed an empty thought, the output is the answer.
  ExpectParses("Hello! How can I help?", {.content = "Hello! How can I help?"});
  ExpectParses("  Two lines\nof text \n", {.content = "  Two lines\nof text \n"});
  // Thinking on: a thought block, then the answer (whitespace at its ends dropped).
  ExpectParses("<|channel>thought\nThe user greets me.\n<channel|>Hello!",
               {.reasoning = "The user greets me.", .content = "Hello!"});
  ExpectParses("<|channel>thought\n  Step 1.\n\nStep 2.  \n<channel|>\n\nAnswer: 4",
               {.reasoning = "Step 1.\n\nStep 2.", .content = "Answer: 4"});
  // An extra empty thought at the end, and a stray <channel|>, as llama.cpp's parser drops them.
  ExpectParses("Answer.<|channel>thought\n<channel|>", {.content = "Answer."});
  ExpectParses("Answer.<channel|>", {.content = "Answer."});
  ExpectParses("<|channel>thought\nA<channel|>Mid <|channel>thought\nB<channel|>end",
               {.reasoning = "AB", .content = "Mid end"});
  // Ran out of tokens while thinking: all reasoning. A channel other than thought is dropped.
  ExpectParses("<|channel>thought\nStill thinking ", {.reasoning = "Still thinking"});
  ExpectParses("<|channel>final Hi", {.content = "final Hi"});
  ExpectParses("Use <|chan for it", {.content = "Use <|chan for it"});
  ExpectParses("<|channel>th", {.content = "th"});
}

TEST(Gemma4ParserTest, ToolCalls) {
  ExpectParses("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
               {.calls = {{"get_weather", R"({"city":"Paris","days":3})"}}});
  // After a thought block, several calls, text around them; whitespace around calls dropped.
  ExpectParses(
      "<|channel>thought\nTwo tools.\n<channel|>Let me check.\n"
      "<|tool_call>call:add{a:2,b:3}<tool_call|>\n<|tool_call>call:mul{a:2.5,b:-3}<tool_call|>\n",
      {.reasoning = "Two tools.",
       .content = "Let me check.",
       .calls = {{"add", R"({"a":2,"b":3})"}, {"mul", R"({"a":2.5,"b":-3})"}}});
  // A <tool_call|> inside a quoted string does not end the call; a call without arguments.
  ExpectParses(
      "<|tool_call>call:note{text:<|\"|>say <tool_call|> twice<|\"|>}<tool_call|>"
      "<|tool_call>call:now{}<tool_call|>",
      {.calls = {{"note", R"({"text":"say <tool_call|> twice"})"}, {"now", "{}"}}});
  // Calls inside a thought block are reasoning.
  ExpectParses("<|channel>thought\nMaybe <|tool_call>call:f{}<tool_call|>?<channel|>No.",
               {.reasoning = "Maybe <|tool_call>call:f{}<tool_call|>?", .content = "No."});
}

TEST(Gemma4ParserTest, MalformedCallsAreContent) {
  const std::string kept[] = {
      "<|tool_call>get_weather{}<tool_call|>",          // no "call:"
      "<|tool_call>call:{a:1}<tool_call|>",             // no name
      "<|tool_call>call:get weather{a:1}<tool_call|>",  // whitespace in the name
      "<|tool_call>call:f{city:Paris}<tool_call|>",     // an unquoted string
      "<|tool_call>call:f{a:1}} trailing<tool_call|>",  // text after the arguments
      "<|tool_call>call:f[1]<tool_call|>",              // not a mapping
      "<|tool_call>call:f{a:1}",                        // never closed
      "<|tool_call>call:f{a:<|\"|>open<tool_call|>",    // a string never closed
  };
  for (const std::string& text : kept) ExpectParses(text, {.content = text});
  ExpectParses(
      "Before <|tool_call>call:f{x}<tool_call|> after <|tool_call>call:g{}<tool_call|>",
      {.content = "Before <|tool_call>call:f{x}<tool_call|> after", .calls = {{"g", "{}"}}});
}

TEST(Gemma4ParserTest, OptionsOffKeepTheText) {
  const std::string text =
      "<|channel>thought\nHmm.<channel|>Ok <|tool_call>call:f{a:1}<tool_call|>";
  ExpectParses(text, {.content = text}, {.split_reasoning = false, .parse_calls = false});
  ExpectParses(text,
               {.content = "<|channel>thought\nHmm.<channel|>Ok", .calls = {{"f", R"({"a":1})"}}},
               {.split_reasoning = false, .parse_calls = true});
  ExpectParses(text, {.reasoning = "Hmm.", .content = "Ok <|tool_call>call:f{a:1}<tool_call|>"},
               {.split_reasoning = true, .parse_calls = false});
}

TEST(Gemma4ParserTest, ThroughChatOutputParser) {
  const std::string text =
      "<|channel>thought\nTwo calls.<channel|><|tool_call>call:a{}<tool_call|>"
      "<|tool_call>call:b{}<tool_call|>";
  ChatOutputParser serial({.split_reasoning = true,
                           .gemma4 = true,
                           .tool_format = ToolFormat::kGemma4,
                           .parallel_tool_calls = false});
  ChatOutputDelta all;
  bool thought = false;
  for (char c : text) {
    ChatOutputDelta d = serial.Push(std::string(1, c));
    thought = thought || serial.thinking();
    all.reasoning += d.reasoning;
    all.content += d.content;
    for (ParsedToolCall& call : d.calls) all.calls.push_back(call);
  }
  ChatOutputDelta last = serial.Finish();
  EXPECT_TRUE(thought);
  EXPECT_FALSE(serial.thinking());
  EXPECT_EQ(all.reasoning + last.reasoning, "Two calls.");
  EXPECT_EQ(all.content + last.content, "");
  ASSERT_EQ(all.calls.size() + last.calls.size(), 1u);
  EXPECT_EQ(serial.n_calls(), 1);
  // No tools offered: calls stay content; reasoning as the request asks.
  ChatOutputParser no_tools({.split_reasoning = false, .gemma4 = true});
  ChatOutputDelta d = no_tools.Push(text);
  ChatOutputDelta end = no_tools.Finish();
  EXPECT_EQ(d.content + end.content, text);
  EXPECT_TRUE(d.reasoning.empty() && d.calls.empty() && end.calls.empty());
}

}  // namespace
}  // namespace kvserve
