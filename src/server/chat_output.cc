#include "server/chat_output.h"

namespace kvserve {

std::optional<ReasoningFormat> ReasoningFormatNamed(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepSeek;
  return std::nullopt;
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options) : options_(options) {
  if (options.split_reasoning) reasoning_.emplace(options.prompt_opens_think);
  if (options.tool_format != ToolFormat::kNone) tools_.emplace(options.tool_format);
}

void ChatOutputParser::TakeCalls(std::vector<ParsedToolCall>& calls, ChatOutputDelta& out) {
  for (ParsedToolCall& call : calls) {
    if (!options_.parallel_tool_calls && n_calls_ >= 1) break;
    out.calls.push_back(std::move(call));
    ++n_calls_;
  }
}

ChatOutputDelta ChatOutputParser::Push(std::string_view text) {
  ChatOutputDelta out;
  std::string content(text);
  if (reasoning_) {
    ReasoningOutput split = reasoning_->Push(text);
    out.reasoning = std::move(split.reasoning);
    content = std::move(split.content);
  }
  if (!tools_) {
    out.content = std::move(content);
    return out;
  }
  ToolCallOutput parsed = tools_->Push(content);
  out.content = std::move(parsed.content);
  TakeCalls(parsed.calls, out);
  return out;
}

ChatOutputDelta ChatOutputParser::Finish() {
  ChatOutputDelta out;
  std::string content;
  if (reasoning_) {
    ReasoningOutput split = reasoning_->Finish();
    out.reasoning = std::move(split.reasoning);
    content = std::move(split.content);
  }
  if (!tools_) {
    out.content = std::move(content);
    return out;
  }
  ToolCallOutput parsed = tools_->Push(content);
  ToolCallOutput last = tools_->Finish();
  out.content = parsed.content + last.content;
  TakeCalls(parsed.calls, out);
  TakeCalls(last.calls, out);
  return out;
}

}  // namespace kvserve
