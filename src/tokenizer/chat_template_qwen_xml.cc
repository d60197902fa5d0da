// The ChatML variants whose tool calls are XML <function=...> blocks: Qwen 3.5's template and
// Qwen3-Coder's (ChatTemplate::RenderQwen35, RenderQwen3Coder), written as those Jinja templates
// write them (../shared/models/chat-templates/Qwen3.5-4B.jinja, Qwen3-Coder.jinja).
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_strings.h"
#include "tokenizer/tool_prompt.h"

namespace kvserve {
namespace {

using jinja::Contains;
using jinja::LStripNewlines;
using jinja::StartsWith;
using jinja::Strip;

// Qwen 3.5's last_query_index: the last user message that is not only a <tool_response> block
// (the template raises when there is none; then the last message's index, its initial value).
size_t LastQueryIndex(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != "user") continue;
    const std::string_view content = Strip(messages[i].content);
    if (!StartsWith(content, "<tool_response>") || !content.ends_with("</tool_response>")) {
      return i;
    }
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

// Qwen 3.5's assistant turn: content holding </think> is split into the reasoning (between the
// last <think> before the first </think> and that </think>) and the text after the last
// </think>; turns after the last user query write the reasoning in a <think> block, earlier
// ones drop it. Then the calls.
void AppendQwen35Assistant(const ChatMessage& m, bool after_last_query, ChatText& out) {
  std::string_view content = Strip(m.content);
  std::string_view reasoning;
  if (Contains(content, "</think>")) {
    std::string_view before = content.substr(0, content.find("</think>"));
    before = before.substr(0, before.find_last_not_of('\n') + 1);
    const size_t think = before.rfind("<think>");
    reasoning = think == std::string_view::npos ? before : before.substr(think + 7);
    content = LStripNewlines(content.substr(content.rfind("</think>") + 8));
  }
  reasoning = Strip(reasoning);
  out += "<|im_start|>assistant\n";
  if (after_last_query) out.AppendAll({"<think>\n", MessageText(reasoning), "\n</think>\n\n"});
  out.AppendMessage(content);
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    if (i > 0) {
      out += "\n";
    } else if (!Strip(content).empty()) {
      out += "\n\n";
    }
    AppendQwenXmlToolCall(m.tool_calls[i], out);
  }
  out += "<|im_end|>\n";
}

}  // namespace

void ChatTemplate::RenderQwen35(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::span<const ChatTool> tools, ChatText& out) const {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string_view system = has_system ? Strip(messages[0].content) : "";
  if (!tools.empty()) {
    AppendQwen35System(system, tools, out);
  } else if (has_system) {
    out.AppendAll({"<|im_start|>system\n", MessageText(system), "<|im_end|>\n"});
  }
  const size_t last_query = LastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string_view content = Strip(m.content);
    if (m.role == "user") {  // a system message after the first is skipped (the template raises)
      out.AppendAll({"<|im_start|>user\n", MessageText(content), "<|im_end|>\n"});
    } else if (m.role == "assistant") {
      AppendQwen35Assistant(m, i > last_query, out);
    } else if (m.role == "tool") {  // consecutive results share one user turn
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>user";
      out.AppendAll({"\n<tool_response>\n", MessageText(content), "\n</tool_response>"});
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n<think>\n";
}

void ChatTemplate::RenderQwen3Coder(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt, std::span<const ChatTool> tools,
                                    ChatText& out) const {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (has_system) {
    out.AppendAll({"<|im_start|>system\n", MessageText(messages[0].content)});
    messages = messages.subspan(1);
  } else if (!tools.empty()) {
    out +=
        "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a "
        "computer to solve tasks.";
  }
  if (!tools.empty()) AppendQwen3CoderTools(tools, out);
  if (has_system || !tools.empty()) out += "<|im_end|>\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      const std::string_view content = Strip(m.content);
      out += "<|im_start|>assistant";
      if (!content.empty()) out.AppendAll({"\n", MessageText(content), "\n"});
      for (const ChatToolCall& call : m.tool_calls) {
        out += "\n";
        AppendQwenXmlToolCall(call, out);
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {  // consecutive results share one user turn
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>user\n";
      out.AppendAll({"<tool_response>\n", MessageText(m.content), "\n</tool_response>\n"});
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      out.AppendAll(
          {"<|im_start|>", MessageText(m.role), "\n", MessageText(m.content), "<|im_end|>\n"});
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
}

}  // namespace kvserve
