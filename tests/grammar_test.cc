// The grammar engine: GBNF and JSON Schema compiled to grammars, documents matched, and token
// masks that equal the slow reference (every token tried on its own) at every step of random
// walks, on a hand-made vocabulary with split UTF-8 characters and on SmolLM2's and Gemma 3's.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"
#include "grammar/grammar_walk_states.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/regex_gbnf.h"
#include "grammar/token_masker.h"
#include "io/gguf_reader.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> MustParse(const std::string& gbnf) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.message() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const Grammar> FromSchema(const json& schema) {
  auto text = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(text.ok()) << text.message();
  if (!text.ok()) return nullptr;
  return MustParse(*text);
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.Accept(text) && m.CanEnd();
}

std::string ParseError(const std::string& gbnf, const GrammarLimits& limits = {}) {
  auto g = ParseGbnf(gbnf, limits);
  return g.ok() ? "" : g.message();
}

std::string SchemaError(const json& schema, const GrammarLimits& limits = {}) {
  auto text = JsonSchemaToGbnf(schema, limits);
  if (!text.ok()) return text.message();
  auto g = ParseGbnf(*text, limits);
  return g.ok() ? "" : g.message();
}

TEST(Gbnf, MatchesWholeDocumentsOnly) {
  auto g = MustParse(R"G(
root ::= expr
expr ::= term ( [-+] term )*   # sums
term ::= [0-9]+ | "(" expr ")"
)G");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "1+2"));
  EXPECT_TRUE(Matches(g, "(1+(22-3))"));
  EXPECT_FALSE(Matches(g, "1+"));
  EXPECT_FALSE(Matches(g, "(1"));
  EXPECT_FALSE(Matches(g, "a"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.Accept("(1"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.Accept(")x"));  // refused as a whole: the state stays after "(1"
  EXPECT_TRUE(m.Accept(")"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Gbnf, RepetitionsClassesAndEscapes) {
  auto g = MustParse("root ::= \"a\"{2,3} [^x-z\\n] \"\\u00e9\"? . \"b\"{2} [\\x41-\\x43]*\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "aaq\xC3\xA9!bbABCA"));
  EXPECT_TRUE(Matches(g, "aaa..bb"));
  EXPECT_FALSE(Matches(g, "a..bb"));     // too few a
  EXPECT_FALSE(Matches(g, "aaaa..bb"));  // 4 a: the 4th is the class, then '.' needs a char
  EXPECT_FALSE(Matches(g, "aay.bb"));    // y is excluded
  EXPECT_FALSE(Matches(g, "aa\n.bb"));
  EXPECT_FALSE(Matches(g, "aa..bbD"));
}

TEST(Gbnf, UnfinishedCharactersAcrossTokens) {
  auto g = MustParse("root ::= [\\u00e0-\\u00ff]+ \"!\"\n");
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  EXPECT_TRUE(m.Accept("\xC3"));   // the lead byte of U+00C0..U+00FF: some completions fit
  EXPECT_FALSE(m.Accept("\x80"));  // U+00C0 is below the range
  EXPECT_TRUE(m.Accept("\xA9"));   // U+00E9
  EXPECT_FALSE(m.Accept("\xC1"));  // overlong forms (here of U+0040..U+007F) are not UTF-8
  EXPECT_FALSE(m.Accept("\xE2"));  // three-byte characters are all beyond U+00FF
  EXPECT_TRUE(m.Accept("!"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Gbnf, RefusesBadGrammarsNamingTheProblem) {
  EXPECT_NE(ParseError("root ::= a\n").find("rule 'a' is used but never defined"),
            std::string::npos);
  EXPECT_NE(ParseError("start ::= \"x\"\n").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(ParseError("root ::= root \"x\" | \"y\"\n").find("'root' is left-recursive"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= a \"x\"\na ::= \"b\"? root | \"y\"\n").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\" root\n").find("'root' never ends"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\"\nroot ::= \"y\"\n").find("defined twice"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\n").find("line 1"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [ab\n").find("unterminated"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\\q\"\n").find("unknown escape"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{5000}\n").find("max_repeat"), std::string::npos);
  EXPECT_NE(ParseError("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')') + "\n")
                .find("max_nesting"),
            std::string::npos);
  EXPECT_NE(
      ParseError("root ::= \"a\"\n", GrammarLimits{.max_source_bytes = 4}).find("max_source_bytes"),
      std::string::npos);
  // A huge alternation stays within max_elements or is refused by it.
  std::string huge = "root ::= \"0\"";
  for (int i = 1; i < 70000; ++i) huge += " | \"" + std::to_string(i) + "\"";
  EXPECT_NE(
      ParseError(huge + "\n", GrammarLimits{.max_source_bytes = 1 << 22}).find("max_elements"),
      std::string::npos);
}

TEST(Gbnf, AmbiguityIsBoundedNotExponential) {
  // Every split of a run of a's is a parse; stacks are deduplicated, so matching stays cheap.
  auto g = MustParse("root ::= x*\nx ::= \"a\" | \"aa\" | \"aaa\"\n");
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(m.Accept("a"));
  EXPECT_LE(m.state().stacks.size(), 8u);
  // A grammar whose parses really multiply hits max_stacks and then allows nothing, at once.
  auto wide = MustParse("root ::= \"a\" root | y\ny ::= [a-z]{0,30} \"!\"\n");
  ASSERT_NE(wide, nullptr);
  GrammarMatcher w(wide);
  for (int i = 0; i < 200 && w.Accept("a"); ++i) {
  }
  EXPECT_LE(w.state().stacks.size(), wide->limits().max_stacks);
}

// The same stacks and the same unfinished character's length; its bits may differ when the walk
// has rewritten them (GrammarWalkStates::CanonicalizePartial): the flags along the way, compared
// with StepByte's at every byte, show that the two still behave the same.
bool SameState(const GrammarState& a, const GrammarState& b) {
  return a.stacks == b.stacks && a.partial.n_remaining == b.partial.n_remaining &&
         a.partial.n_bytes == b.partial.n_bytes && a.overflowed == b.overflowed;
}

// A walk's remembered transitions give the states StepByte gives, whether the table has room or
// is full (then states are held per depth), through unfinished UTF-8 characters, dead bytes and
// stack overflows; and a string's loop is remembered as one state, not one per byte.
TEST(GrammarWalkStates, EqualStepByteWithAndWithoutRoom) {
  std::vector<std::shared_ptr<const Grammar>> grammars = {
      FromSchema(json::parse(R"({"type": "object", "properties": {"name": {"type": "string"},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}}}})")),
      MustParse("root ::= \"a\" root | y\ny ::= [a-z]{0,30} \"!\"\n"),  // overflows
      MustParse("root ::= ( [a-c\\u00e9\\u4e2d] | \"\\U0001F600\" )* \".\"\n"),
  };
  const std::string alphabet = "abc{}[]\":, !.\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xff";
  std::mt19937 rng(11);
  GrammarWalkStates reused;
  for (const auto& g : grammars) {
    ASSERT_NE(g, nullptr);
    for (size_t max_states : {size_t{4096}, size_t{3}}) {
      GrammarMatcher m(g);
      GrammarWalkStates& walk = reused;  // one walker for every grammar: Reset starts afresh
      walk.Reset(*g, m.state(), max_states);
      std::vector<GrammarState> expected(1, m.state());
      std::string bytes;
      size_t reached = 0;  // depths 0..reached hold the previous token's states
      for (int round = 0; round < 300; ++round) {
        // Back to a random depth of the previous token, as a trie walk does, then new bytes.
        const size_t keep = std::min<size_t>(rng() % 4, reached);
        bytes.resize(keep);
        expected.resize(keep + 1);
        while (bytes.size() < 12) bytes += alphabet[rng() % alphabet.size()];
        for (size_t d = keep; d < bytes.size(); ++d) {
          expected.emplace_back();
          StepByte(*g, expected[d], static_cast<uint8_t>(bytes[d]), expected[d + 1]);
          walk.Step(d, static_cast<uint8_t>(bytes[d]));
          reached = d + 1;
          ASSERT_TRUE(SameState(walk.at(d + 1), expected[d + 1]))
              << "byte " << d << " of round " << round << ", max_states " << max_states;
          ASSERT_TRUE(SameState(walk.at(keep), expected[keep]));
          const GrammarState& e = expected[d + 1];
          EXPECT_EQ(walk.flags(d + 1),
                    (e.stacks.empty() ? GrammarWalkStates::kDead : 0) |
                        (e.has_empty_stack() ? GrammarWalkStates::kEmptyStack : 0) |
                        (e.overflowed ? GrammarWalkStates::kOverflowed : 0));
          if (expected[d + 1].stacks.empty()) break;
        }
      }
      EXPECT_LE(walk.interned(), max_states);
    }
  }
  auto string = FromSchema(json::parse(R"({"type": "string"})"));
  ASSERT_NE(string, nullptr);
  GrammarMatcher m(string);
  ASSERT_TRUE(m.Accept("\""));
  GrammarWalkStates walk(*string, m.state());
  for (size_t d = 0; d < 2000; ++d) walk.Step(d, static_cast<uint8_t>('a' + d % 26));
  EXPECT_FALSE(walk.at(2000).stacks.empty());
  EXPECT_LE(walk.interned(), 3u);
  // Characters of two, three and four bytes: one state per bytes left of a character, not one
  // per prefix; a character set that does not hold a whole length keeps its bits (U+00E9 alone).
  const std::string text =
      "\xc3\xa9\xd0\xaf\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80\xf0\x9f\x8c\x8d";
  GrammarWalkStates utf8(*string, m.state());
  for (size_t d = 0; d < 60 * text.size(); ++d) {
    utf8.Step(d, static_cast<uint8_t>(text[d % text.size()]));
    ASSERT_EQ(utf8.flags(d + 1) & GrammarWalkStates::kDead, 0) << d;
  }
  EXPECT_LE(utf8.interned(), 8u);
  auto accented = MustParse("root ::= [a-z\\u00e9]*\n");
  ASSERT_NE(accented, nullptr);
  GrammarMatcher a(accented);
  GrammarWalkStates exact(*accented, a.state());
  exact.Step(0, 0xC3);
  exact.Step(1, 0xA8);  // U+00E8: not in the set
  EXPECT_NE(exact.flags(2) & GrammarWalkStates::kDead, 0);
  exact.Step(1, 0xA9);
  EXPECT_EQ(exact.flags(2) & GrammarWalkStates::kDead, 0);
}

TEST(CharSet, ContainsAllFollowsAdjacentRangesAndNegation) {
  CharSet s{.ranges = {{0x80, 0xFF}, {0x100, 0x7FF}, {0x900, 0x9FF}}};
  EXPECT_TRUE(s.ContainsAll(0x80, 0x7FF));
  EXPECT_TRUE(s.ContainsAll(0x100, 0x100));
  EXPECT_FALSE(s.ContainsAll(0x80, 0x800));
  EXPECT_FALSE(s.ContainsAll(0x7F, 0x80));
  EXPECT_FALSE(s.ContainsAll(0x800, 0x9FF));
  s.negated = true;
  EXPECT_TRUE(s.ContainsAll(0x800, 0x8FF));
  EXPECT_FALSE(s.ContainsAll(0x800, 0x900));
  EXPECT_TRUE(s.ContainsAll(0xA00, 0x10FFFF));
  EXPECT_FALSE(s.ContainsAll(0, 0x80));
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalMembers) {
  auto g = FromSchema(json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name"]})"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"name": "x"})"));
  EXPECT_TRUE(Matches(g, R"({"name":"x","age":-3,"tags":["a","b"]})"));
  EXPECT_TRUE(Matches(g, "{\n  \"name\": \"x\",\n  \"tags\": []\n}"));
  EXPECT_FALSE(Matches(g, R"({"age": 3})"));               // name is required
  EXPECT_FALSE(Matches(g, R"({"name": "x", "x": 1})"));    // no additional properties
  EXPECT_FALSE(Matches(g, R"({"age": 3, "name": "x"})"));  // members in the schema's order
  EXPECT_FALSE(Matches(g, R"({"name": "x",})"));
  EXPECT_FALSE(Matches(g, R"({"name": 1})"));
  EXPECT_FALSE(Matches(g, R"({"name": "x", "age": 1.5})"));
}

TEST(JsonSchema, AdditionalPropertiesEnumConstAnyOfAndRefs) {
  auto g = FromSchema(json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {
        "v": {"enum": ["a", 1, null, true]},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["v", "next"]}},
    "type": "object",
    "properties": {"kind": {"const": "list"}, "head": {"$ref": "#/$defs/node"},
                   "meta": {"type": "object", "additionalProperties": {"type": "boolean"}}},
    "required": ["kind", "head"]})"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"({"kind":"list","head":{"v":"a","next":{"v":1,"next":null}}})"));
  EXPECT_TRUE(Matches(g, R"({"kind":"list","head":{"v":null,"next":null},"meta":{"x":true}})"));
  EXPECT_FALSE(Matches(g, R"({"kind":"lists","head":{"v":"a","next":null}})"));
  EXPECT_FALSE(Matches(g, R"({"kind":"list","head":{"v":"b","next":null}})"));
  EXPECT_FALSE(Matches(g, R"({"kind":"list","head":{"v":"a","next":null},"meta":{"x":1}})"));
  EXPECT_FALSE(Matches(g, R"({"kind":"list","head":{"v":"a"}})"));
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  for (const auto& [lo, hi] :
       std::vector<std::pair<int, int>>{{-23, 117}, {0, 9}, {5, 1000}, {-1000, -7}, {99, 101}}) {
    auto g = FromSchema({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    ASSERT_NE(g, nullptr);
    for (int v = -1200; v <= 1200; ++v) {
      ASSERT_EQ(Matches(g, std::to_string(v)), v >= lo && v <= hi)
          << v << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(Matches(g, "007"));
    EXPECT_FALSE(Matches(g, "-0"));
  }
  auto open = FromSchema({{"type", "integer"}, {"exclusiveMinimum", 10}});
  ASSERT_NE(open, nullptr);
  EXPECT_FALSE(Matches(open, "10"));
  EXPECT_TRUE(Matches(open, "11"));
  EXPECT_TRUE(Matches(open, "123456789012"));
  EXPECT_FALSE(Matches(open, "-11"));
}

TEST(JsonSchema, StringsArraysAndNumbers) {
  auto g = FromSchema(json::parse(R"({"type": "array", "minItems": 2, "maxItems": 3,
    "items": {"type": "string", "minLength": 1, "maxLength": 3}})"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"(["a","bcd"])"));
  EXPECT_TRUE(Matches(g, R"(["a", "b", "\n"])"));
  EXPECT_FALSE(Matches(g, R"(["a"])"));
  EXPECT_FALSE(Matches(g, R"(["a","b","c","d"])"));
  EXPECT_FALSE(Matches(g, R"(["abcd","b"])"));
  EXPECT_FALSE(Matches(g, R"(["","b"])"));
  auto n = FromSchema({{"type", "number"}});
  ASSERT_NE(n, nullptr);
  for (const char* ok : {"0", "-1.5", "3e10", "2.25E-3"}) EXPECT_TRUE(Matches(n, ok)) << ok;
  for (const char* bad : {"01", "1.", ".5", "+1", "1e"}) EXPECT_FALSE(Matches(n, bad)) << bad;
  auto date = FromSchema({{"type", "string"}, {"format", "date-time"}});
  ASSERT_NE(date, nullptr);
  EXPECT_TRUE(Matches(date, R"("2026-12-05T07:30:00Z")"));
  EXPECT_FALSE(Matches(date, R"("2026-13-05T07:30:00Z")"));
}

TEST(JsonSchema, Patterns) {
  auto g = FromSchema({{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d{3,4}(x|yz)?$"}});
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, R"("AB-123")"));
  EXPECT_TRUE(Matches(g, R"("AB-1234yz")"));
  EXPECT_FALSE(Matches(g, R"("AB-12")"));
  EXPECT_FALSE(Matches(g, R"("ab-123")"));
  EXPECT_FALSE(Matches(g, R"("AB-123y")"));
  auto quote = FromSchema({{"type", "string"}, {"pattern", "^a\"b\\\\c$"}});
  ASSERT_NE(quote, nullptr);
  EXPECT_TRUE(Matches(quote, R"("a\"b\\c")"));  // the JSON text escapes what the pattern matched
  auto unanchored = FromSchema({{"type", "string"}, {"pattern", "[0-9]{2}"}});
  ASSERT_NE(unanchored, nullptr);
  EXPECT_TRUE(Matches(unanchored, R"("xx42yy")"));
  EXPECT_FALSE(Matches(unanchored, R"("x4y")"));
  EXPECT_NE(SchemaError({{"type", "string"}, {"pattern", "^(a*)*$"}}).find("empty string"),
            std::string::npos);
  EXPECT_NE(SchemaError({{"type", "string"}, {"pattern", "(a)\\1"}}).find("backreferences"),
            std::string::npos);
  EXPECT_NE(SchemaError({{"type", "string"}, {"pattern", "a(?=b)"}}).find("lookaround"),
            std::string::npos);
}

TEST(JsonSchema, RefusesWhatItCannotEnforce) {
  EXPECT_NE(
      SchemaError({{"type", "integer"}, {"multipleOf", 3}}).find("'multipleOf' is not supported"),
      std::string::npos);
  EXPECT_NE(SchemaError(json::parse(R"({"properties": {"a": {"not": {}}}})"))
                .find("schema.properties.a: 'not'"),
            std::string::npos);
  EXPECT_NE(SchemaError({{"$ref", "#/$defs/missing"}}).find("not defined"), std::string::npos);
  EXPECT_NE(SchemaError({{"type", "number"}, {"maximum", 3}}).find("bounds on a number"),
            std::string::npos);
  EXPECT_NE(SchemaError({{"type", "strin"}}).find("unknown type 'strin'"), std::string::npos);
  json deep = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(SchemaError(deep).find("max_nesting"), std::string::npos);
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 5000; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}};
  EXPECT_NE(SchemaError(wide).find("limit max_rules"), std::string::npos);
  EXPECT_NE(SchemaError({{"type", "string"}, {"maxLength", 100000}}).find("max_repeat"),
            std::string::npos);
}

// Random walks: at each step the mask must equal the slow reference; a token is then chosen
// among the allowed ones (end tokens only when nothing else is allowed).
void CheckMasksOnWalks(TokenMasker& masker, int walks, int steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(masker.grammar());
    for (int step = 0; step < steps; ++step) {
      TokenMask fast, slow;
      masker.FillMask(m, fast);
      masker.FillMaskByEveryToken(m, slow);
      ASSERT_EQ(fast, slow) << "walk " << w << " step " << step << ": " << fast.Count()
                            << " tokens allowed, the reference allows " << slow.Count();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < fast.n_vocab(); ++id) {
        if (fast.Test(id) && !masker.vocab().is_end(id)) allowed.push_back(id);
        if (fast.Test(id)) {
          EXPECT_TRUE(masker.Allows(m, id));
        }
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(m.Accept(masker.vocab().piece(allowed[rng() % allowed.size()])));
    }
  }
}

// Every byte alone, and pieces that cross the grammar's boundaries and split characters.
std::shared_ptr<const GrammarVocab> HandMadeVocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p :
       {"{\"",    "\":",      "\": \"", "\",",    "\"}",      "}\n",  "true", "false",
        "null",   " [",       "],",     "12",     "-3",       ".5e",  "e+",   "\\u00",
        "\\\"",   "\xC3\xA9", "\xC3",   "\xA9\"", "\xE2\x82", "\xAC", "name", "\"name\"",
        "age\":", "AB-",      "-12",    "34yz\"", "  ",       "\n  ", ",\n",  "\"a\",\"b",
        "\"}}",   "}}",       "x\"}",   "\"}}}}"}) {
    pieces.emplace_back(p);
  }
  pieces.emplace_back("");  // a control token: never allowed
  pieces.emplace_back("</s>");
  const auto end = static_cast<int32_t>(pieces.size() - 1);
  return std::make_shared<const GrammarVocab>(std::move(pieces), std::vector<int32_t>{end});
}

std::vector<std::shared_ptr<const Grammar>> WalkGrammars() {
  std::vector<std::shared_ptr<const Grammar>> out;
  out.push_back(MustParse(JsonObjectGbnf()));
  out.push_back(FromSchema(json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "pattern": "^AB-\\d{2,4}(yz)?$"},
      "age": {"type": "integer", "minimum": -50, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "\u00e9\u20ac"]}, "maxItems": 4},
      "note": {"type": "string", "maxLength": 6}},
      "required": ["name", "age"]})")));
  out.push_back(MustParse("root ::= [\\u00e0-\\u00ff\\u20ac]+ (\"!\" | \"e+\" [0-9])\n"));
  // Stacks deeper than a cache key: tokens such as "\"}}" leave the key's rules and are decided
  // by the whole stack.
  json deep = {{"type", "string"}, {"maxLength", 5}};
  for (const char* name : {"e", "d", "c", "b", "a"}) {
    deep = {{"type", "object"}, {"properties", {{name, deep}}}, {"required", {name}}};
  }
  out.push_back(FromSchema(deep));
  return out;
}

TEST(TokenMasker, EqualsTheReferenceOnAHandMadeVocabulary) {
  auto vocab = HandMadeVocab();
  uint64_t seed = 1;
  for (const auto& g : WalkGrammars()) {
    ASSERT_NE(g, nullptr);
    TokenMasker masker(g, vocab);
    CheckMasksOnWalks(masker, 30, 60, seed++);
    EXPECT_GT(masker.cached_positions(), 0u);
  }
}

TEST(TokenMasker, EndTokensOnlyWhenTheDocumentIsWhole) {
  auto vocab = HandMadeVocab();
  const int32_t end = vocab->end_tokens()[0];
  TokenMasker masker(MustParse("root ::= \"ab\" \"c\"?\n"), vocab);
  GrammarMatcher m(masker.grammar());
  TokenMask mask;
  masker.FillMask(m, mask);
  EXPECT_FALSE(mask.Test(end));
  EXPECT_TRUE(mask.Test('a'));
  EXPECT_EQ(mask.Count(), 1);
  ASSERT_TRUE(m.Accept("ab"));
  masker.FillMask(m, mask);
  EXPECT_TRUE(mask.Test(end));
  EXPECT_TRUE(mask.Test('c'));
  EXPECT_EQ(mask.Count(), 2);
  ASSERT_TRUE(m.Accept("c"));
  EXPECT_TRUE(m.Done());
  masker.FillMask(m, mask);
  EXPECT_EQ(mask.Count(), 1);
  EXPECT_TRUE(mask.Test(end));
}

// Bounded repetitions: masks inside more_k derive from the chain's outermost rule (token_masker.h),
// so every count is checked: 0, 1, min, max, tokens that cross max, two-byte characters (one
// character each), characters split across tokens, escapes (a character of several bytes of
// text), nested bounded repetitions, and units of several characters.
std::shared_ptr<const GrammarVocab> CountingVocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"ab",
                        "abc",
                        "abca",
                        "abcab",
                        "abcabc",
                        "abcabca",
                        "abcabcab",
                        "aa",
                        "aaa",
                        "aaaa",
                        "aaaaaaaaa",
                        "\xC3\xA9",
                        "a\xC3\xA9",
                        "\xC3\xA9\xC3\xA9",
                        "\xC3\xA9\xC3\xA9\xC3\xA9",
                        "a\xC3",
                        "\xA9"
                        "a",
                        "ab>",
                        "abc>",
                        "\xC3\xA9>",
                        "a>x",
                        "ab)(",
                        ")(",
                        "a)",
                        "b)(a",
                        ")(ab)",
                        ").",
                        "ab!",
                        "\xC3\xA9"
                        "b!",
                        "\\u00e9",
                        "\\n",
                        "\\u00",
                        "e9",
                        "ab\"",
                        "abcdefgh\"",
                        "\"}",
                        "a\"}",
                        "abab;",
                        "\xC3\xA9"
                        "ab",
                        "abab",
                        "ab.",
                        "a;",
                        ";"}) {
    pieces.emplace_back(p);
  }
  pieces.emplace_back("</s>");
  const auto end = static_cast<int32_t>(pieces.size() - 1);
  return std::make_shared<const GrammarVocab>(std::move(pieces), std::vector<int32_t>{end});
}

// LongerThan by its two paths (few tokens: sorted; many: one pass), against counting.
TEST(GrammarVocabTest, LongerThanListsTheTokensOfMoreCharacters) {
  std::vector<std::string> pieces;
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    const int n = 1 + static_cast<int>(rng() % (i % 50 == 0 ? 40 : 6));
    for (int c = 0; c < n; ++c) p += rng() % 4 == 0 ? "\xc3\xa9" : std::string(1, 'a' + rng() % 3);
    pieces.push_back(p);
  }
  GrammarVocab vocab(pieces, {});
  for (uint32_t n : {0u, 1u, 3u, 6u, 7u, 20u, 39u, 40u}) {
    std::vector<uint32_t> expected;
    for (size_t i = 0; i < vocab.order().size(); ++i) {
      uint32_t chars = 0;
      for (char c : vocab.sorted_piece(i)) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
      if (chars > n) expected.push_back(static_cast<uint32_t>(i));
    }
    EXPECT_EQ(vocab.LongerThan(n), expected) << "n = " << n;
  }
}

TEST(TokenMasker, BoundedRepetitionsEqualTheReference) {
  auto vocab = CountingVocab();
  std::vector<std::shared_ptr<const Grammar>> grammars = {
      MustParse("root ::= \"<\" [a-c\\u00e9]{0,6} \">\" [a-x]?\n"),
      MustParse("root ::= [a-c\\u00e9]{2,5} \"!\"\n"),
      MustParse("root ::= [ab]{1} [ab]{0,1} [ab]{3,3} \"x\"\n"),
      MustParse("root ::= ( \"(\" [ab\\u00e9]{1,3} \")\" ){0,4} \".\"\n"),
      MustParse("root ::= ( \"ab\" | \"\\u00e9\" ){0,5} \";\"\n"),
      MustParse("root ::= ( [ab]{0,3} \";\" ){2,3}\n"),
      MustParse("root ::= ( \"a\"? [bc]? ){0,5} \"x\"\n"),  // a unit that may match nothing
      FromSchema(json::parse(R"({"type": "string", "minLength": 2, "maxLength": 7})")),
      FromSchema(json::parse(R"({"type": "array", "maxItems": 3,
          "items": {"type": "string", "maxLength": 3}})")),
  };
  uint64_t seed = 7;
  for (const auto& g : grammars) {
    ASSERT_NE(g, nullptr);
    TokenMasker masker(g, vocab);
    CheckMasksOnWalks(masker, 120, 30, seed++);
  }
}

TEST(TokenMasker, PositionsInABoundedRepetitionShareTheirWalk) {
  auto vocab = CountingVocab();
  TokenMasker masker(MustParse("root ::= \"\\\"\" [a-z]{0,40} \"\\\"\"\n"), vocab);
  GrammarMatcher m(masker.grammar());
  ASSERT_TRUE(m.Accept("\""));
  for (int i = 0; i <= 40; ++i) {
    TokenMask fast, slow;
    masker.FillMask(m, fast);
    masker.FillMaskByEveryToken(m, slow);
    ASSERT_EQ(fast, slow) << "after " << i << " characters";
    if (i < 40) {
      ASSERT_TRUE(m.Accept("a"));
    }
  }
  // Whole walks of the vocabulary before the string, in its chain, at its last character (more_1,
  // outside the chain) and after it; small ones for the tokens near the bound; not 42 walks.
  EXPECT_LT(masker.walked_tokens(), 5 * vocab->order().size());
}

std::unique_ptr<Tokenizer> RealTokenizer(const std::string& name) {
  const std::string path = testing::RealModelPath(name);
  if (path.empty()) return nullptr;
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

TEST(TokenMasker, EqualsTheReferenceOnRealVocabularies) {
  for (const char* name : {"smollm2-135m", "gemma3-270m"}) {
    auto tokenizer = RealTokenizer(name);
    ASSERT_NE(tokenizer, nullptr) << name;
    auto vocab = GrammarVocab::FromTokenizer(*tokenizer);
    uint64_t seed = 100;
    for (const auto& g : WalkGrammars()) {
      ASSERT_NE(g, nullptr);
      TokenMasker masker(g, vocab);
      CheckMasksOnWalks(masker, 2, std::string(name) == "smollm2-135m" ? 40 : 12, seed++);
    }
  }
}

}  // namespace
}  // namespace kvserve
