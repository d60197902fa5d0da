// Turns a chat model's output into OpenAI tool calls, as it streams: the text outside the calls
// stays content, each call becomes a name and its arguments as JSON text. One parser per choice,
// fed the generated text piece by piece; text that may still turn out to be part of a call (a
// marker's first bytes, an unfinished call) is held back until it is decided, so the content and
// calls of Push(a) + Push(b) + Finish() do not depend on where the text was cut.
//
//   ToolCallParser parser(ToolFormat::kHermes);
//   ToolCallOutput out = parser.Push(piece);   // out.content: text to show now; out.calls: done
//   ToolCallOutput last = parser.Finish();     // at the end of generation
//
// Formats (ToolFormat of the chat template):
//   kHermes  <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number, anywhere
//   kLlama3  the reply is {"name": ..., "parameters": {...}} (or "arguments"), optionally after
//            <|python_tag|>; several calls may follow one another
//   kMistral [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   kQwenXml <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...
//            </function>\n</tool_call> (Qwen 3.5, Qwen3-Coder); one call per <function=...>
//            block, any number of blocks in a <tool_call>. VALUE loses one leading and one
//            trailing newline and ends at the first "</parameter>"; it becomes a JSON string
//            when the tool's schema (given to the constructor) makes the parameter a string
//            (QwenXmlStringParameter), else the JSON value it spells when it
//            parses as JSON (True, False and None, as the templates print Python values, are
//            true, false and null), else a JSON string. So without the schemas, "42" is a number.
//   kHarmony gpt-oss's calls are messages among its other channels: HarmonyParser
//            (server/harmony_parser.h) parses them; here the text is all content.
//   kGemma4  Gemma 4's <|tool_call>call:NAME{...}<tool_call|> calls come with its thought channel:
//            Gemma4Parser (server/gemma4_parser.h) parses them; here the text is all content.
// Malformed output (an unclosed tag, JSON that does not parse, an object without a name) is never
// an error: it stays content, markers included. Whitespace around calls is not content: a run of
// whitespace is held until text follows it and dropped at the end when calls were found.
// Not thread-safe; one per choice.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace kvserve {

// The length of the longest end of `text` that is a proper beginning of `marker`: what a
// streaming parser holds back, since the next piece may complete the marker.
size_t PartialMarker(std::string_view text, std::string_view marker);

struct ParsedToolCall {
  std::string id;         // "call_" + 24 random alphanumerics (Mistral: 9 alphanumerics)
  std::string name;       // the function's name
  std::string arguments;  // the arguments object as compact JSON text
};

struct ToolCallOutput {
  std::string content;                // text outside calls, decided in this step
  std::vector<ParsedToolCall> calls;  // calls completed in this step, in order
};

class ToolCallParser {
 public:
  // `tools`: the request's tools; kQwenXml reads which parameters are strings from them.
  explicit ToolCallParser(ToolFormat format, std::span<const ChatTool> tools = {});

  ToolCallOutput Push(std::string_view text);
  // The end of the output: whatever is held is decided (an unfinished call becomes content).
  ToolCallOutput Finish();
  // Push(text) + Finish() in one.
  static ToolCallOutput ParseAll(ToolFormat format, std::string_view text,
                                 std::span<const ChatTool> tools = {});

  int n_calls() const { return n_calls_; }

 private:
  enum class Mode { kStart, kText, kInCall, kPlain };

  void Drain(bool final, ToolCallOutput& out);
  bool DrainTagged(bool final, std::string_view open, std::string_view close, ToolCallOutput& out);
  bool DrainJsonAfterMarker(bool final, std::string_view marker, ToolCallOutput& out);
  bool DrainLlamaStart(bool final, ToolCallOutput& out);
  // The calls of a <tool_call> body, or nullopt when it is not well-formed.
  std::optional<std::vector<ParsedToolCall>> CallsFromXml(std::string_view body) const;
  // Decides the text before `marker` (or the whole pending text when it holds no marker, minus
  // what could be the marker's first bytes): content. True when `marker` was found.
  bool TakeTextBefore(bool final, std::string_view marker, ToolCallOutput& out);
  void EmitContent(std::string_view text, ToolCallOutput& out);
  void AddCall(ParsedToolCall call, ToolCallOutput& out);

  ToolFormat format_;
  Mode mode_ = Mode::kStart;
  std::string pending_;  // undecided text (inside kInCall: after the opening marker)
  std::string marker_;   // kInCall: the marker that opened the call, given back if it fails
  std::string held_ws_;  // whitespace after the last content, held until text follows
  int n_calls_ = 0;
  // kQwenXml: per tool, the parameters whose schema type is "string".
  std::map<std::string, std::set<std::string>, std::less<>> string_parameters_;
};

// Whether a parameter of a kQwenXml call is written as text, not JSON: its schema's type is
// "string" or a list holding "string", or it has no type and an enum or const of strings only.
bool QwenXmlStringParameter(const nlohmann::ordered_json& schema);

// A fresh call id for `format` (Mistral's template wants exactly 9 alphanumerics).
std::string NewToolCallId(ToolFormat format);

}  // namespace kvserve
