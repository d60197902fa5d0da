// The grammar that makes `tool_choice: "required"` and a named function hold: the answer is one
// or more calls (one when parallel_tool_calls is false, or in Llama 3's format, which has one
// call per turn), each to one of the forced functions with arguments that match its
// `parameters` schema, written in the chat template's call syntax:
//   Hermes/Qwen (and ChatML models such as SmolLM2): <tool_call>\n{"name": N, "arguments":
//   {...}}\n</tool_call> Llama 3: {"name": N, "parameters": {...}}
// Mistral's calls start with a control token ([TOOL_CALLS]) that a grammar over text cannot
// produce: nullopt (not enforced; docs/api.md says so).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/chat_template.h"
#include "util/status.h"

namespace kvserve {

// The GBNF text, or nullopt when the format cannot be enforced. Errors (a tool's parameters that
// are not a schema the grammar engine takes) name the tool.
Result<std::optional<std::string>> ForcedToolCallGbnf(ToolFormat format,
                                                      std::span<const ChatTool> tools,
                                                      const std::vector<std::string>& forced,
                                                      bool parallel,
                                                      const GrammarLimits& limits = {});

}  // namespace kvserve
