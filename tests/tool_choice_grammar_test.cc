// tool_choice "required" and a named function: the grammar's documents are exactly calls in the
// template's syntax to the forced tools with arguments of their schemas.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "server/harmony_parser.h"
#include "server/tool_call_parser.h"
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
  for (ToolFormat format : {ToolFormat::kHermes, ToolFormat::kQwenXml}) {
    auto gbnf = ForcedToolCallGrammar(format, tools, {"f"}, true);
    ASSERT_FALSE(gbnf.ok());
    EXPECT_NE(gbnf.message().find("'f'"), std::string::npos) << gbnf.message();
    EXPECT_NE(gbnf.message().find("multipleOf"), std::string::npos) << gbnf.message();
  }
}

// Qwen 3.5 / Qwen3-Coder: <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n...
const std::vector<ChatTool> kXmlTools = {
    {"get_weather",
     R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1,
       "maximum": 14}, "options": {"type": "object", "properties": {"hourly": {"type":
       "boolean"}}, "required": ["hourly"]}, "unit": {"enum": ["c", "f"]},
       "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
       "note": {"type": "string", "minLength": 2, "maxLength": 5}},
       "required": ["city", "days"], "$defs": {"tag": {"type": "string", "maxLength": 3}}}}})"},
    {"get_time", R"({"type": "function", "function": {"name": "get_time"}})"},
};

std::shared_ptr<const Grammar> CompileXml(std::vector<std::string> forced, bool parallel) {
  auto forced_calls = ForcedToolCallGrammar(ToolFormat::kQwenXml, kXmlTools, forced, parallel);
  EXPECT_TRUE(forced_calls.ok()) << forced_calls.message();
  if (!forced_calls.ok() || !*forced_calls) return nullptr;
  EXPECT_EQ((*forced_calls)->answer_prefix, "");
  auto grammar = ParseGbnf((*forced_calls)->gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.message() << "\n" << (*forced_calls)->gbnf;
  return grammar.ok() ? *grammar : nullptr;
}

std::string XmlCall(const std::string& name, const std::string& parameters) {
  return "<tool_call>\n<function=" + name + ">\n" + parameters + "</function>\n</tool_call>";
}

std::string XmlParameter(const std::string& key, const std::string& value) {
  return "<parameter=" + key + ">\n" + value + "\n</parameter>\n";
}

TEST(ToolChoiceGrammar, QwenXmlCallsToTheForcedToolsOnly) {
  auto g = CompileXml({"get_weather", "get_time"}, true);
  ASSERT_NE(g, nullptr);
  const std::string weather = XmlCall(
      "get_weather", XmlParameter("city", "New York\n<b>x <<") + XmlParameter("days", "3") +
                         XmlParameter("unit", "f") + XmlParameter("tags", "[\"abc\", \"d\"]"));
  const std::string time = XmlCall("get_time", "");
  EXPECT_TRUE(Matches(g, weather));
  EXPECT_TRUE(Matches(g, time));
  EXPECT_TRUE(Matches(g, weather + "\n" + time));
  EXPECT_TRUE(
      Matches(g, XmlCall("get_weather", XmlParameter("city", "") + XmlParameter("days", "14"))));
  EXPECT_FALSE(Matches(g, ""));
  EXPECT_FALSE(Matches(g, "Sure. " + time));
  EXPECT_FALSE(Matches(g, XmlCall("get_weather", XmlParameter("city", "Oslo"))));  // days
  EXPECT_FALSE(Matches(
      g, XmlCall("get_weather", XmlParameter("city", "Oslo") + XmlParameter("days", "15"))));
  EXPECT_FALSE(Matches(
      g, XmlCall("get_weather", XmlParameter("city", "a</b>") + XmlParameter("days", "1"))));
  EXPECT_FALSE(
      Matches(g, XmlCall("get_weather", XmlParameter("city", "Oslo") + XmlParameter("days", "1") +
                                            XmlParameter("unit", "k"))));
  EXPECT_FALSE(
      Matches(g, XmlCall("get_weather", XmlParameter("city", "Oslo") + XmlParameter("days", "1") +
                                            XmlParameter("tags", "[\"abcd\"]"))));
  EXPECT_FALSE(Matches(g, XmlCall("delete_all", "")));
  auto one = CompileXml({"get_time"}, false);
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(Matches(one, time));
  EXPECT_FALSE(Matches(one, time + "\n" + time));
  EXPECT_FALSE(Matches(one, weather));
}

// A random document of `g`: each rule's alternative picked at random (past a depth, the one of
// fewest elements, so that every walk ends), each character drawn from tricky ones its set holds.
bool Generate(const Grammar& g, uint32_t rule, int depth, std::mt19937& rng, std::string& out) {
  static const std::vector<std::string> kPool = {"a",  "Z", "0", "1", "9",  " ",
                                                 "\n", "<", "/", ">", "\"", "\\",
                                                 "{",  "}", "-", "e", "t",  "\xc3\xa9"};
  if (depth > 200 || out.size() > 4000) return false;
  const auto& alternatives = g.rules()[rule].alternatives;
  size_t pick = rng() % alternatives.size();
  if (depth > 12 || rng() % 3 == 0) {  // toward the end: the shortest alternative
    for (size_t a = 0; a < alternatives.size(); ++a) {
      if (alternatives[a].size() < alternatives[pick].size()) pick = a;
    }
  }
  for (const GrammarElement& e : alternatives[pick]) {
    if (e.kind == GrammarElement::Kind::kRule) {
      if (!Generate(g, e.index, depth + 1, rng, out)) return false;
    } else if (e.kind == GrammarElement::Kind::kChars) {
      std::vector<std::string> fits;
      for (const std::string& c : kPool) {
        const uint32_t cp = c.size() == 1 ? static_cast<uint8_t>(c[0]) : 0xe9;
        if (g.chars(e).Contains(cp)) fits.push_back(c);
      }
      if (fits.empty()) {
        const uint32_t cp = g.chars(e).ranges.front().first;
        if (g.chars(e).negated || cp > 0x7f) return false;
        fits.emplace_back(1, static_cast<char>(cp));
      }
      out += fits[rng() % fits.size()];
    }
  }
  return true;
}

// Whatever the grammar lets the model write parses back into calls to the forced tools, with
// the required arguments present and each of its schema's type.
TEST(ToolChoiceGrammar, QwenXmlRandomDocumentsParseBackIntoValidCalls) {
  auto g = CompileXml({"get_weather", "get_time"}, true);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(17);
  int checked = 0;
  std::map<std::string, int> seen;  // the walks reach every parameter and several calls
  for (int i = 0; i < 3000 && checked < 300; ++i) {
    std::string doc;
    if (!Generate(*g, g->root(), 0, rng, doc)) continue;
    ++checked;
    for (const char* part : {"<parameter=options>", "<parameter=tags>", "<parameter=unit>",
                             "<parameter=note>", "</tool_call>\n<tool_call>", "\n\n</parameter>"}) {
      seen[part] += doc.find(part) != std::string::npos;
    }
    ASSERT_TRUE(Matches(g, doc)) << doc;
    const ToolCallOutput parsed = ToolCallParser::ParseAll(ToolFormat::kQwenXml, doc, kXmlTools);
    EXPECT_EQ(parsed.content, "") << doc;
    ASSERT_FALSE(parsed.calls.empty()) << doc;
    for (const ParsedToolCall& call : parsed.calls) {
      const auto args = nlohmann::json::parse(call.arguments);
      ASSERT_TRUE(args.is_object()) << doc;
      if (call.name == "get_time") {
        EXPECT_TRUE(args.empty()) << doc;
        continue;
      }
      ASSERT_EQ(call.name, "get_weather") << doc;
      ASSERT_TRUE(args.contains("city") && args.contains("days")) << doc;
      EXPECT_TRUE(args["city"].is_string()) << doc;
      EXPECT_TRUE(args["days"].is_number_integer()) << doc;
      EXPECT_GE(args["days"].get<int>(), 1) << doc;
      EXPECT_LE(args["days"].get<int>(), 14) << doc;
      if (args.contains("unit")) {
        EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << doc;
      }
      if (args.contains("options")) {
        EXPECT_TRUE(args["options"]["hourly"].is_boolean()) << doc;
      }
      if (args.contains("note")) {  // minLength 2, maxLength 5, in characters
        ASSERT_TRUE(args["note"].is_string()) << doc;
        const std::string note = args["note"].get<std::string>();
        const auto chars = std::count_if(note.begin(), note.end(), [](char c) {
          return (static_cast<uint8_t>(c) & 0xC0) != 0x80;
        });
        EXPECT_GE(chars, 2) << doc;
        EXPECT_LE(chars, 5) << doc;
      }
      if (args.contains("tags")) {
        ASSERT_TRUE(args["tags"].is_array()) << doc;
        for (const auto& tag : args["tags"]) EXPECT_TRUE(tag.is_string()) << doc;
      }
    }
  }
  EXPECT_GE(checked, 100);
  for (const auto& [part, n] : seen) EXPECT_GT(n, 0) << part;
}

// gpt-oss: the forced function's header is the answer's prefix (control tokens), the grammar its
// arguments; prefix + document parse back into the call. Choosing among several is refused.
TEST(ToolChoiceGrammar, HarmonyOneFunctionAsPrefixAndArguments) {
  auto forced = ForcedToolCallGrammar(ToolFormat::kHarmony, kTools, {"get_weather"}, true);
  ASSERT_TRUE(forced.ok()) << forced.message();
  ASSERT_TRUE(forced->has_value());
  EXPECT_EQ((*forced)->answer_prefix,
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>");
  const auto g = Compile(ToolFormat::kHarmony, {"get_weather"}, true);
  ASSERT_NE(g, nullptr);
  const std::string document = R"({"city": "Paris", "unit": "c"})";
  EXPECT_TRUE(Matches(g, document));
  EXPECT_FALSE(Matches(g, R"({"city": "Paris"})"));  // unit is required
  EXPECT_FALSE(Matches(g, R"({"city": "Paris", "unit": "k"})"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n" + document + "\n</tool_call>"));
  HarmonyParser parser({});
  HarmonyOutput out = parser.Push((*forced)->answer_prefix + document);
  HarmonyOutput last = parser.Finish();
  ASSERT_EQ(out.calls.size() + last.calls.size(), 1u);
  const ParsedToolCall& call = out.calls.empty() ? last.calls[0] : out.calls[0];
  EXPECT_EQ(call.name, "get_weather");
  EXPECT_EQ(call.arguments, R"({"city":"Paris","unit":"c"})");
  EXPECT_EQ(out.content + last.content, "");
  // A tool without parameters: any object.
  const auto any = Compile(ToolFormat::kHarmony, {"get_time"}, false);
  ASSERT_NE(any, nullptr);
  EXPECT_TRUE(Matches(any, "{}"));
  auto several =
      ForcedToolCallGrammar(ToolFormat::kHarmony, kTools, {"get_weather", "get_time"}, true);
  ASSERT_FALSE(several.ok());
  EXPECT_NE(several.message().find("tool_choice: \"required\" with 2 tools"), std::string::npos)
      << several.message();
}

// Gemma 4 has no forced-call grammar yet: an error that names tool_choice.
TEST(ToolChoiceGrammarTest, Gemma4RefusesForcedCalls) {
  auto forced = ForcedToolCallGrammar(ToolFormat::kGemma4, kTools, {"get_weather"}, true);
  ASSERT_FALSE(forced.ok());
  EXPECT_TRUE(forced.message().starts_with("tool_choice: ")) << forced.message();
  EXPECT_NE(forced.message().find("gemma4"), std::string::npos) << forced.message();
}

}  // namespace
}  // namespace kvserve
