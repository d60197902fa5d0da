// The grammar that makes `tool_choice: "required"` and a named function hold: the answer is one
// or more calls (one when parallel_tool_calls is false, or in Llama 3's format, which has one
// call per turn), each to one of the forced functions with arguments that match its
// `parameters` schema, written in the chat template's call syntax:
//   Hermes/Qwen (and ChatML models such as SmolLM2): <tool_call>\n{"name": N, "arguments":
//   {...}}\n</tool_call>
//   Llama 3: {"name": N, "parameters": {...}}
//   Mistral: [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]; [TOOL_CALLS] is a control token
//   that a grammar over text cannot write, so it becomes the answer's prefix: put after the
//   generation cue as the answer's first token (the model's own first token when it calls), and
//   the grammar covers the array after it.
//   Qwen 3.5 / Qwen3-Coder (XML): <tool_call>\n<function=N>\n then per parameter, in the
//   schema's order (required ones always, others optionally), <parameter=K>\nVALUE\n
//   </parameter>\n, then </function>\n</tool_call>; calls separated by "\n". A string parameter
//   (QwenXmlStringParameter) is text without "</" (one of its enum's strings when it has one;
//   maxLength, pattern and format are not enforced there), any other is JSON of its schema.
//   Parameters outside `properties` are never written.
//   gpt-oss (harmony): one function only (a named one, or "required" with a single tool; more is
//   an error: the name would have to be chosen before <|message|>, a control token): the answer
//   starts with "<|channel|>commentary to=functions.N <|constrain|>json<|message|>" as its
//   prefix, and the grammar is the arguments' JSON; the model's <|call|> ends the answer.
//   Gemma 4: none yet (its <|tool_call> is a control token and its arguments are not JSON): an
//   error that names tool_choice.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/chat_template.h"
#include "util/status.h"

namespace kvserve {

struct ForcedToolCalls {
  std::string gbnf;           // the grammar of the answer (after answer_prefix)
  std::string answer_prefix;  // text (control tokens) the answer starts with; "" for most formats
};

// The grammar, or nullopt when the format has no calls (kNone). Errors (a tool's parameters that
// are not a schema the grammar engine takes) name the tool.
Result<std::optional<ForcedToolCalls>> ForcedToolCallGrammar(ToolFormat format,
                                                             std::span<const ChatTool> tools,
                                                             const std::vector<std::string>& forced,
                                                             bool parallel,
                                                             const GrammarLimits& limits = {});

}  // namespace kvserve
