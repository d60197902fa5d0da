// Gemma 4's chat format (ChatTemplate::RenderGemma4, CheckGemma4), written as its Jinja template
// writes it (../shared/models/chat-templates/google-gemma-4-31B-it.jinja; checked against Jinja2
// by tests/gemma4_render_test.cc over tests/data/gemma4):
//
//   <bos><|turn>system\n[<|think|>\n]SYSTEM<|tool>declaration:...<tool|><turn|>\n
//   <|turn>user\nTEXT<turn|>\n
//   <|turn>model\n[<|channel>thought\nREASONING\n<channel|>]<|tool_call>call:NAME{k:v}<tool_call|>
//     <|tool_response>response:NAME{value:<|"|>RESULT<|"|>}<tool_response|>ANSWER<turn|>\n
//   <|turn>model\n<|channel>thought\n<channel|>        (the cue; with thinking on, no empty
//   thought)
//
// The tool results of a call (OpenAI's role "tool" messages right after it) are written inside the
// calling model turn, and a model message right after them continues that turn. A turn whose
// calls have results and no text after them stays open (no <turn|>, no cue: the model goes on);
// calls without results end the prompt with <|tool_response>.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/gemma4_tool_text.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_strings.h"

namespace kvserve {
namespace {

using Json = nlohmann::ordered_json;
using jinja::Strip;
using Piece = ChatText::Piece;

// The template's strip_thinking: the text outside <|channel>...<channel|> blocks, trimmed.
std::string StripThinking(std::string_view text) {
  std::string kept;
  size_t start = 0;
  while (true) {
    const size_t close = text.find("<channel|>", start);
    const std::string_view part = text.substr(
        start, close == std::string_view::npos ? std::string_view::npos : close - start);
    kept += part.substr(0, part.find("<|channel>"));
    if (close == std::string_view::npos) break;
    start = close + std::string_view("<channel|>").size();
  }
  return std::string(Strip(kept));
}

// A call as <|tool_call>call:NAME{key:value,...}<tool_call|>, the arguments' keys sorted. Arguments
// that are not JSON are written as they are (the template's string case); JSON that is not an
// object is written as nothing.
void AppendCall(const ChatToolCall& call, ChatText& out) {
  out.AppendAll({"<|tool_call>call:", MessageText(call.name), "{"});
  const Json arguments = JsonNestingDepth(call.arguments) > kMaxJinjaJsonDepth
                             ? Json(Json::value_t::discarded)
                             : Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_discarded()) {
    out.AppendMessage(call.arguments);
  } else if (arguments.is_object()) {
    bool first = true;
    for (auto member : Gemma4SortedMembers(arguments)) {
      if (!first) out += ",";
      first = false;
      out.AppendAll({MessageText(member.key()), ":"});
      AppendGemma4Value(member.value(), /*quote_keys=*/false, out);
    }
  }
  out += "}<tool_call|>";
}

// The name a tool result is written under: the call of `caller` whose id it answers (the last
// such), else its own "name".
std::string_view ResultName(const ChatMessage& caller, const ChatMessage& result) {
  std::string_view name = result.name;
  for (const ChatToolCall& call : caller.tool_calls) {
    if (call.id == result.tool_call_id) name = call.name;
  }
  return name;
}

// The role "tool" messages right after messages[i], as <|tool_response> blocks. Whether there were
// any.
bool AppendResults(std::span<const ChatMessage> messages, size_t i, ChatText& out) {
  bool any = false;
  for (size_t k = i + 1; k < messages.size() && messages[k].role == "tool"; ++k) {
    out.AppendAll({"<|tool_response>response:", MessageText(ResultName(messages[i], messages[k])),
                   "{value:<|\"|>", MessageText(messages[k].content), "<|\"|>}<tool_response|>"});
    any = true;
  }
  return any;
}

// The role of the last message before messages[i] that is not a tool result ("" if none).
std::string_view PreviousRole(std::span<const ChatMessage> messages, size_t i) {
  while (i-- > 0) {
    if (messages[i].role != "tool") return messages[i].role;
  }
  return "";
}

}  // namespace

void ChatTemplate::RenderGemma4(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::span<const ChatTool> tools, bool enable_thinking,
                                ChatText& out) const {
  out += bos_text_;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (enable_thinking || !tools.empty() || has_system) {
    out.AppendAll({"<|turn>system\n", enable_thinking ? "<|think|>\n" : ""});
    if (has_system) {
      out.AppendMessage(Strip(messages[0].content));
      messages = messages.subspan(1);
    }
    for (const ChatTool& tool : tools) {
      out += "<|tool>";
      AppendGemma4Declaration(tool.json, out);
      out += "<tool|>";
    }
    out += "<turn|>\n";
  }
  size_t last_user = messages.size();  // none
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "user") last_user = i;
  }
  // How the last message ended: the cue follows neither calls nor their results.
  bool ended_in_tools = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") continue;  // written by the call before it
    const bool model = m.role == "assistant";
    if (!(model && PreviousRole(messages, i) == "assistant")) {
      out.AppendAll({"<|turn>", model ? Piece("model") : Piece(MessageText(m.role)), "\n"});
    }
    const bool after_last_user = last_user == messages.size() || i > last_user;
    if (m.reasoning && !m.reasoning->empty() && after_last_user && !m.tool_calls.empty()) {
      out.AppendAll({"<|channel>thought\n", MessageText(*m.reasoning), "\n<channel|>"});
    }
    for (const ChatToolCall& call : m.tool_calls) AppendCall(call, out);
    const bool results = !m.tool_calls.empty() && AppendResults(messages, i, out);
    out.AppendMessage(model ? StripThinking(m.content) : std::string(Strip(m.content)));
    ended_in_tools = !m.tool_calls.empty();
    if (!m.tool_calls.empty() && !results) {
      out += "<|tool_response>";
    } else if (!(results && m.content.empty())) {
      out += "<turn|>\n";
    }
  }
  if (add_generation_prompt && !ended_in_tools) {
    out.AppendAll({"<|turn>model\n", enable_thinking ? "" : "<|channel>thought\n<channel|>"});
  }
}

Status ChatTemplate::CheckGemma4(std::span<const ChatMessage> messages) const {
  // A result that answers no call of its turn and has no name: the template fails on it.
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& caller = messages[i];
    if (caller.role == "tool" || caller.tool_calls.empty()) continue;
    for (size_t k = i + 1; k < messages.size() && messages[k].role == "tool"; ++k) {
      const ChatMessage& result = messages[k];
      const bool answers =
          std::any_of(caller.tool_calls.begin(), caller.tool_calls.end(),
                      [&](const ChatToolCall& call) { return call.id == result.tool_call_id; });
      if (!answers && result.name.empty()) {
        return Status::InvalidArgument(
            "'messages[" + std::to_string(k) + "].tool_call_id' is '" +
            result.tool_call_id.substr(0, 40) + "', which is no call of 'messages[" +
            std::to_string(i) + "]', and the result has no 'name'; Gemma 4's template needs one");
      }
    }
  }
  return Status::Ok();
}

}  // namespace kvserve
