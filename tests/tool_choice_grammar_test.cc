// tool_choice "required" and a named function: the grammar's documents are exactly calls in the
// template's syntax to the forced tools with arguments of their schemas.
#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "server/tool_choice_grammar.h"

namespace kvserve {
namespace {

const std::vector<ChatTool> kTools = {
    {"get_weather",
     R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
       "required": ["city", "unit"]}}})"},
    {"get_time", R"({"type": "function", "function": {"name": "get_time"}})"},
};

std::shared_ptr<const Grammar> Compile(ToolFormat format, std::vector<std::string> forced,
                                       bool parallel) {
  auto forced_calls = ForcedToolCallGrammar(format, kTools, forced, parallel);
  EXPECT_TRUE(forced_calls.ok()) << forced_calls.message();
  if (!forced_calls.ok() || !*forced_calls) return nullptr;
  auto grammar = ParseGbnf((*forced_calls)->gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.message() << "\n" << (*forced_calls)->gbnf;
  return grammar.ok() ? *grammar : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.Accept(text) && m.CanEnd();
}

TEST(ToolChoiceGrammar, HermesCallsToTheForcedToolsOnly) {
  auto required = Compile(ToolFormat::kHermes, {"get_weather", "get_time"}, true);
  ASSERT_NE(required, nullptr);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": "
      "\"c\"}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Matches(required, weather));
  EXPECT_TRUE(Matches(required, time));
  EXPECT_TRUE(Matches(required, weather + "\n" + time));
  EXPECT_FALSE(Matches(required, "Sure! " + weather));  // text is not a call
  EXPECT_FALSE(Matches(required, ""));
  EXPECT_FALSE(Matches(required,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"city\": \"Oslo\", \"unit\": \"k\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(required,
                       "<tool_call>\n{\"name\": \"delete_all\", \"arguments\": "
                       "{}}\n</tool_call>"));
  auto named = Compile(ToolFormat::kHermes, {"get_time"}, false);
  ASSERT_NE(named, nullptr);
  EXPECT_TRUE(Matches(named, time));
  EXPECT_FALSE(Matches(named, weather));
  EXPECT_FALSE(Matches(named, time + "\n" + time));  // parallel_tool_calls false: one call
}

TEST(ToolChoiceGrammar, Llama3OneJsonCall) {
  auto g = Compile(ToolFormat::kLlama3, {"get_weather"}, true);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(
      Matches(g, R"({"name": "get_weather", "parameters": {"city": "Rome", "unit": "f"}})"));
  EXPECT_FALSE(
      Matches(g, R"({"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}})"));
}

// Mistral: the answer starts with the [TOOL_CALLS] control token (the prompt's last token), then a
// JSON array of calls that the grammar enforces.
TEST(ToolChoiceGrammar, MistralArrayAfterTheToolCallsToken) {
  auto forced = ForcedToolCallGrammar(ToolFormat::kMistral, kTools, {"get_time"}, true);
  ASSERT_TRUE(forced.ok()) << forced.message();
  ASSERT_TRUE(forced->has_value());
  EXPECT_EQ((*forced)->answer_prefix, "[TOOL_CALLS]");
  auto g = Compile(ToolFormat::kMistral, {"get_weather", "get_time"}, true);
  ASSERT_NE(g, nullptr);
  const std::string time = R"({"name": "get_time", "arguments": {}})";
  const std::string weather =
      R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}})";
  EXPECT_TRUE(Matches(g, "[" + time + "]"));
  EXPECT_TRUE(Matches(g, "[" + weather + ", " + time + "]"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, "[TOOL_CALLS][" + time + "]"));  // the token is the prompt's, not text
  EXPECT_FALSE(Matches(g, "Sure: [" + time + "]"));
  auto one = Compile(ToolFormat::kMistral, {"get_time"}, false);
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(Matches(one, "[" + time + "]"));
  EXPECT_FALSE(Matches(one, "[" + time + ", " + time + "]"));  // parallel_tool_calls false
  EXPECT_FALSE(Matches(one, "[" + weather + "]"));
  auto none = ForcedToolCallGrammar(ToolFormat::kNone, kTools, {"get_time"}, true);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ToolChoiceGrammar, ParametersTheEngineCannotEnforceAreRefusedNamingTheTool) {
  const std::vector<ChatTool> tools = {
      {"f", R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"n": {"type": "integer", "multipleOf": 2}}}}})"}};
  auto gbnf = ForcedToolCallGrammar(ToolFormat::kHermes, tools, {"f"}, true);
  ASSERT_FALSE(gbnf.ok());
  EXPECT_NE(gbnf.message().find("multipleOf"), std::string::npos) << gbnf.message();
}

}  // namespace
}  // namespace kvserve
