#include "server/chat_output.h"

namespace kvserve {

std::optional<ReasoningFormat> ReasoningFormatNamed(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepSeek;
  return std::nullopt;
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options) : options_(std::move(options)) {
  if (options_.harmony) {
    harmony_.emplace(HarmonyOptions{.split_reasoning = options_.split_reasoning,
                                    .parse_calls = options_.tool_format == ToolFormat::kHarmony});
    return;
  }
  if (options_.gemma4) {
    gemma4_.emplace(Gemma4Options{.split_reasoning = options_.split_reasoning,
                                  .parse_calls = options_.tool_format == ToolFormat::kGemma4});
    return;
  }
  if (options_.split_reasoning) reasoning_.emplace(options_.prompt_opens_think);
  if (options_.tool_format != ToolFormat::kNone)
    tools_.emplace(options_.tool_format, options_.tools);
}

void ChatOutputParser::TakeCalls(std::vector<ParsedToolCall>& calls, ChatOutputDelta& out) {
  for (ParsedToolCall& call : calls) {
    if (!options_.parallel_tool_calls && n_calls_ >= 1) break;
    out.calls.push_back(std::move(call));
    ++n_calls_;
  }
}

ChatOutputDelta ChatOutputParser::FromHarmony(HarmonyOutput parsed) {
  ChatOutputDelta out{.reasoning = std::move(parsed.reasoning),
                      .content = std::move(parsed.content)};
  TakeCalls(parsed.calls, out);
  return out;
}

ChatOutputDelta ChatOutputParser::FromGemma4(Gemma4Output parsed) {
  ChatOutputDelta out{.reasoning = std::move(parsed.reasoning),
                      .content = std::move(parsed.content)};
  TakeCalls(parsed.calls, out);
  return out;
}

ChatOutputDelta ChatOutputParser::Push(std::string_view text) {
  if (harmony_) return FromHarmony(harmony_->Push(text));
  if (gemma4_) return FromGemma4(gemma4_->Push(text));
  if (!reasoning_) return ThroughTools(std::string(text), "", /*finish=*/false);
  ReasoningOutput split = reasoning_->Push(text);
  return ThroughTools(std::move(split.content), std::move(split.reasoning), /*finish=*/false);
}

ChatOutputDelta ChatOutputParser::Finish() {
  if (harmony_) return FromHarmony(harmony_->Finish());
  if (gemma4_) return FromGemma4(gemma4_->Finish());
  ReasoningOutput split = reasoning_ ? reasoning_->Finish() : ReasoningOutput{};
  return ThroughTools(std::move(split.content), std::move(split.reasoning), /*finish=*/true);
}

ChatOutputDelta ChatOutputParser::ThroughTools(std::string content, std::string reasoning,
                                               bool finish) {
  ChatOutputDelta out;
  out.reasoning = std::move(reasoning);
  if (!tools_) {
    out.content = std::move(content);
    return out;
  }
  ToolCallOutput parsed = tools_->Push(content);
  out.content = std::move(parsed.content);
  TakeCalls(parsed.calls, out);
  if (finish) {
    ToolCallOutput last = tools_->Finish();
    out.content += last.content;
    TakeCalls(last.calls, out);
  }
  return out;
}

}  // namespace kvserve
