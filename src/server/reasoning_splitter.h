// Splits a thinking model's output into its reasoning (<think>...</think>, Qwen 3, DeepSeek-R1
// distills) and its answer, as it streams. The block is recognised at the start of the output
// only (after whitespace), or is already open when the prompt opened it (DeepSeek-R1's generation
// cue ends with "<think>\n"). Whitespace at the reasoning's two ends and at the answer's start is
// dropped; an unclosed block (the model ran out of tokens) is all reasoning. Output that does not
// start a block is all content, unchanged. As with ToolCallParser, text that may be a tag's first
// bytes is held back, so the pieces' sums do not depend on where the text was cut.
//
//   ReasoningSplitter splitter(/*starts_inside=*/chat.prompt_opens_think());
//   ReasoningOutput out = splitter.Push(piece);   // out.reasoning, out.content
//   ReasoningOutput last = splitter.Finish();
//
// Not thread-safe; one per choice.
#pragma once

#include <string>
#include <string_view>

namespace kvserve {

struct ReasoningOutput {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_inside) : starts_inside_(starts_inside) {}

  ReasoningOutput Push(std::string_view text);
  ReasoningOutput Finish();
  // Whether the output is inside the block now (for a thinking budget).
  bool thinking() const { return state_ == State::kThinking; }

 private:
  enum class State { kStart, kThinking, kContent };

  void Drain(bool final, ReasoningOutput& out);

  bool starts_inside_;
  State state_ = State::kStart;
  std::string pending_;
  std::string held_ws_;           // kThinking: whitespace after the last reasoning text
  bool reasoning_begun_ = false;  // kThinking: non-whitespace reasoning was emitted
  bool content_begun_ = false;    // kContent: non-whitespace content was emitted
};

}  // namespace kvserve
