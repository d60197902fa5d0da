// Splits Gemma 4's output into reasoning, content and tool calls as it streams:
//
//   <|channel>thought\nREASONING<channel|>ANSWER<|tool_call>call:NAME{ARGUMENTS}<tool_call|>
//
// (llama.cpp's peg-gemma4 parser is the behavioral spec):
//   <|channel>thought ... <channel|>   reasoning, with split_reasoning (whitespace at its two ends
//                            and at the start of the text after it dropped; unclosed, it runs to
//                            the end); any number of such blocks, anywhere outside calls. A
//                            <|channel> not followed by "thought" and a <channel|> outside a
//                            block are dropped. Without split_reasoning all of it is content.
//   <|tool_call>call:NAME{...}<tool_call|>   a call, with parse_calls: NAME (non-empty, no
//                            whitespace) and the arguments, Gemma's syntax (gemma4_arguments.h),
//                            as JSON; a <tool_call|> inside a <|"|>-quoted string does not end it.
//                            A call that is malformed or never closed is content, markers included.
//                            Without parse_calls it is content.
// Whitespace around calls is not content, as ToolCallParser does it: a run of whitespace is held
// until text follows it and dropped at the end when calls were found. Text that may be a marker's
// first bytes is held back, so what Push(a) + Push(b) + Finish() gives does not depend on where
// the text was cut. The prompt's cue closes an empty thought channel when thinking is off, so the
// output is usually the answer alone; the stop strings <turn|> and <|tool_response> end it.
//
//   Gemma4Parser parser({.split_reasoning = true, .parse_calls = true});
//   Gemma4Output out = parser.Push(piece);   // out.reasoning, out.content, out.calls
//   Gemma4Output last = parser.Finish();
//
// Not thread-safe; one per choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace kvserve {

struct Gemma4Options {
  bool split_reasoning = true;  // thought blocks -> reasoning (false: they stay content)
  bool parse_calls = true;      // <|tool_call> blocks -> tool calls (false: they stay content)
};

struct Gemma4Output {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
};

class Gemma4Parser {
 public:
  explicit Gemma4Parser(Gemma4Options options) : options_(options) {}

  Gemma4Output Push(std::string_view text);
  Gemma4Output Finish();
  // Whether the output is inside a thought block now (for a thinking budget).
  bool thinking() const { return state_ == State::kThought; }

 private:
  enum class State { kText, kChannelName, kThought, kCall };

  // Each drains what it can of pending_; true when it changed state and draining goes on.
  bool DrainText(bool final, Gemma4Output& out);
  bool DrainChannelName(bool final);
  bool DrainThought(bool final, Gemma4Output& out);
  bool DrainCall(bool final, Gemma4Output& out);
  void Drain(bool final, Gemma4Output& out);
  void EmitContent(std::string_view text, Gemma4Output& out);
  void EmitReasoning(std::string_view text, Gemma4Output& out);

  Gemma4Options options_;
  State state_ = State::kText;
  std::string pending_;           // undecided text (kCall: after <|tool_call>)
  std::string held_ws_;           // whitespace after the last content, held until text follows
  std::string held_reasoning_;    // kThought: whitespace after the last reasoning text
  bool reasoning_begun_ = false;  // kThought: the block has non-whitespace reasoning
  bool skip_space_ = false;       // kText: right after a thought block, whitespace is dropped
  int n_calls_ = 0;
};

}  // namespace kvserve
