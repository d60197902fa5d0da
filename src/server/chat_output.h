// What a chat choice's generated text becomes in the answer: reasoning (ReasoningSplitter),
// content and tool calls (ToolCallParser), or for gpt-oss all three from its harmony messages
// (HarmonyParser) and for Gemma 4 from its thought channel and calls (Gemma4Parser), decided as the
// text streams. The routes keep one per
// choice and feed it each token's text.
//
//   ChatOutputParser parser({.split_reasoning = true, .tool_format = ToolFormat::kHermes});
//   ChatOutputDelta d = parser.Push(event.text);   // d.reasoning, d.content, d.calls
//   ChatOutputDelta last = parser.Finish();
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/gemma4_parser.h"
#include "server/harmony_parser.h"
#include "server/reasoning_splitter.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_template.h"

namespace kvserve {

// --reasoning-format and the request's "reasoning_format" (llama.cpp's names).
enum class ReasoningFormat {
  kNone,      // "none": <think>...</think> stays in the content
  kDeepSeek,  // "deepseek": split out as reasoning_content
};
std::optional<ReasoningFormat> ReasoningFormatNamed(std::string_view name);

struct ChatOutputOptions {
  bool split_reasoning = false;     // ReasoningFormat::kDeepSeek
  bool prompt_opens_think = false;  // ChatTemplate::prompt_opens_think()
  // The template is gpt-oss's: the output is harmony messages (HarmonyParser), whose analysis is
  // the reasoning (with split_reasoning) and whose calls are parsed when tool_format is kHarmony.
  bool harmony = false;
  // The template is Gemma 4's: thought blocks are the reasoning (with split_reasoning) and calls
  // are parsed when tool_format is kGemma4 (Gemma4Parser).
  bool gemma4 = false;
  // The template's tool format; kNone when the request offers no tools (or tool_choice "none"):
  // then nothing is parsed as a call.
  ToolFormat tool_format = ToolFormat::kNone;
  bool parallel_tool_calls = true;  // false: calls after the first are dropped
  // The request's tools, for formats whose parsing reads their schemas (kQwenXml).
  std::vector<ChatTool> tools;
};

struct ChatOutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);

  ChatOutputDelta Push(std::string_view text);
  ChatOutputDelta Finish();
  // Calls handed out so far.
  int n_calls() const { return n_calls_; }
  // Whether the output is inside its reasoning block now (reasoning split out only).
  bool thinking() const {
    return (reasoning_ && reasoning_->thinking()) || (harmony_ && harmony_->thinking()) ||
           (gemma4_ && gemma4_->thinking());
  }

 private:
  void TakeCalls(std::vector<ParsedToolCall>& calls, ChatOutputDelta& out);
  // The text outside reasoning through the tool-call parser (at the end, with what it held).
  ChatOutputDelta ThroughTools(std::string content, std::string reasoning, bool finish);

  ChatOutputOptions options_;
  std::optional<ReasoningSplitter> reasoning_;
  std::optional<ToolCallParser> tools_;
  std::optional<HarmonyParser> harmony_;
  std::optional<Gemma4Parser> gemma4_;
  ChatOutputDelta FromHarmony(HarmonyOutput parsed);
  ChatOutputDelta FromGemma4(Gemma4Output parsed);
  int n_calls_ = 0;
};

}  // namespace kvserve
