// Splits gpt-oss's output, a sequence of harmony messages, into reasoning, content and tool calls
// as it streams. The prompt ends with "<|start|>assistant", so the output starts inside the first
// message's header; each message is
//
//   HEADER<|message|>BODY TERMINATOR      (later ones start with <|start|>ROLE)
//
// with HEADER "<|channel|>CHANNEL" plus an optional recipient " to=functions.NAME" (before or
// after the channel) and content type (" json", " <|constrain|>json"), and TERMINATOR <|end|>,
// <|return|>, <|call|> (or the end of the output, as the stop strings cut them off). A message's
// BODY becomes, by its header:
//   analysis channel           reasoning (with split_reasoning; else the whole message, markup
//                              included, is content, as "none" keeps <think> blocks)
//   recipient functions.NAME   a tool call with BODY, a JSON object, as its arguments (with
//                              parse_calls; else BODY is content)
//   anything else (final, commentary to the user)   content
// Malformed output is never an error and never lost: output that does not start with a header,
// a header over kMaxHeaderBytes or broken by a terminator, anything but <|start|> after a
// terminator, and a call whose BODY is not a JSON object become content as they were written,
// markup included; from the first such place on the rest of the output is content. As with
// ToolCallParser, text that may be a marker's first bytes is held back, so what Push(a) +
// Push(b) + Finish() gives does not depend on where the text was cut.
//
//   HarmonyParser parser({});
//   HarmonyOutput out = parser.Push(piece);   // out.reasoning, out.content, out.calls
//   HarmonyOutput last = parser.Finish();
//
// Not thread-safe; one per choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace kvserve {

struct HarmonyOptions {
  bool split_reasoning = true;  // analysis -> reasoning (false: it stays content, markup and all)
  bool parse_calls = true;  // functions.NAME messages -> tool calls (false: their BODY is content)
};

struct HarmonyOutput {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
};

class HarmonyParser {
 public:
  // A header longer than this (without <|message|>) is not one.
  static constexpr size_t kMaxHeaderBytes = 256;

  explicit HarmonyParser(HarmonyOptions options) : options_(options) {}

  HarmonyOutput Push(std::string_view text);
  HarmonyOutput Finish();
  // Whether the output is inside an analysis message's body now (for a thinking budget).
  bool thinking() const { return state_ == State::kBody && kind_ == Kind::kReasoning; }

 private:
  enum class State { kHeader, kBody, kBetween, kPlain };
  enum class Kind { kReasoning, kContent, kRawContent, kCall };

  void Drain(bool final, HarmonyOutput& out);
  bool DrainHeader(bool final, HarmonyOutput& out);
  bool DrainBody(bool final, HarmonyOutput& out);
  bool DrainBetween(bool final, HarmonyOutput& out);
  // The message's header is decided: its kind, and for a call the function's name.
  void StartBody(std::string_view header, HarmonyOutput& out);
  // The body ended (terminator "" at the end of the output).
  void EndBody(std::string_view terminator, HarmonyOutput& out);
  void EmitBody(std::string_view text, HarmonyOutput& out);
  // Gives up on the structure: `text` and everything after it are content.
  void ToPlain(std::string_view text, HarmonyOutput& out);

  HarmonyOptions options_;
  State state_ = State::kHeader;
  Kind kind_ = Kind::kContent;
  bool first_ = true;      // the header of the output's first message (no <|start|>ROLE)
  std::string pending_;    // undecided text
  std::string raw_;        // kCall: the message as written so far, given back if it fails
  std::string call_name_;  // kCall
  std::string call_body_;  // kCall: the arguments' text so far
};

}  // namespace kvserve
