// How tools, tool calls and tool results are written into a prompt, family by family, as the
// families' own Jinja templates write them (../shared/models/chat-templates): the pieces
// ChatTemplate's renderers put between their turns. Everything that came from the request
// (tool definitions, names, ids, arguments, results) is appended as MessageText, so it never
// becomes a control token.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"
#include "tokenizer/chat_text.h"

namespace kvserve {

// Tool-call arguments as templates print them: the JSON re-dumped as json.dumps does, or the
// text as it is when it is not JSON (Qwen 3's `arguments is string` branch).
std::string ToolArgumentsText(std::string_view arguments);

// How a family marks a turn: open + role + after_role + text + close; tool results open their
// user turn with results_open.
struct TurnMarkup {
  std::string_view open;
  std::string_view after_role;
  std::string_view close;
  std::string_view results_open;
};
inline constexpr TurnMarkup kChatMlTurns{"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>user"};
inline constexpr TurnMarkup kGraniteTurns{"<|start_of_role|>", "<|end_of_role|>",
                                          "<|end_of_text|>\n",
                                          "<|start_of_role|>user<|end_of_role|>"};

// Hermes / Qwen (ChatML). The system turn that lists the tools: `system` (the conversation's own
// system message, or the template's default; "" for none) then the "# Tools" block.
void AppendHermesSystem(std::string_view system, std::span<const ChatTool> tools, ChatText& out);
// An assistant turn with tool calls: its content, then one <tool_call> block per call (Qwen and
// Granite 4 alike, in their own turn markup).
void AppendHermesToolCalls(const ChatMessage& message, const TurnMarkup& turns, ChatText& out);
// messages[i], a tool result: consecutive results share one user turn.
void AppendHermesToolResult(std::span<const ChatMessage> messages, size_t i,
                            const TurnMarkup& turns, ChatText& out);

// Granite 4: the system text with the tools ("You are a helpful assistant with access to the
// following tools. ..."), appended to `system` after a blank line when it is not empty.
std::string GraniteToolsSystem(std::string_view system, std::span<const ChatTool> tools);

// Hermes 3 (NousResearch's tool_use template): its system turn, written whether or not there are
// tools, which lists them with a Python-typed signature and an "Args:" list in each description.
void AppendHermes3System(std::span<const ChatTool> tools, ChatText& out);

// Llama 3.1/3.2/3.3 (tools_in_user_message, the templates' default). The first user turn with
// the tools before `first_user` (trimmed by the caller).
void AppendLlama3ToolsTurn(std::string_view first_user, std::span<const ChatTool> tools,
                           ChatText& out);
// An assistant turn of one call: {"name": ..., "parameters": ...}.
void AppendLlama3ToolCall(const ChatMessage& message, ChatText& out);
// A tool result in an "ipython" turn (the templates print a string result through tojson).
void AppendLlama3ToolResult(const ChatMessage& message, ChatText& out);

// Mistral (Nemo). [AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS], written before the last user turn.
void AppendMistralTools(std::span<const ChatTool> tools, ChatText& out);
// [TOOL_CALLS][{"name", "arguments", "id"}, ...] and the EOS text.
void AppendMistralToolCalls(const ChatMessage& message, std::string_view eos, ChatText& out);
// [TOOL_RESULTS]{"content": ..., "call_id": ...}[/TOOL_RESULTS]
void AppendMistralToolResult(const ChatMessage& message, ChatText& out);

// Qwen 3.5 and Qwen3-Coder (XML calls). One call: "<tool_call>\n<function=NAME>\n", then per
// argument "<parameter=KEY>\n" VALUE "\n</parameter>\n", then "</function>\n</tool_call>". A
// string VALUE is written as it is, an object or array through tojson, anything else as Jinja's
// `string` filter prints it (True, False, None, numbers as Python prints them). Arguments that
// are not a JSON object write no parameters (the templates iterate a mapping's items).
void AppendQwenXmlToolCall(const ChatToolCall& call, ChatText& out);
// Qwen 3.5's system turn with tools: "# Tools" with one tojson line per tool, the format
// instructions, then "\n\n" + `system` (trimmed by the caller) when it is not empty.
void AppendQwen35System(std::string_view system, std::span<const ChatTool> tools, ChatText& out);
// Qwen3-Coder's tools block (after the system text, before <|im_end|>): each tool as
// <function><name>...</name><description>...</description><parameters>...</parameters>
// </function>, keys the template does not name written as <key>value</key>.
void AppendQwen3CoderTools(std::span<const ChatTool> tools, ChatText& out);

}  // namespace kvserve
