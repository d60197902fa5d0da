// Jinja's `tojson` filter as Hugging Face chat templates define it: Python's
// json.dumps(value, ensure_ascii=False, indent=indent), so keys keep their order, separators are
// ", " and ": " (or "," and ": " with an indent) and text outside ASCII is written as it is.
// Templates print tools, tool-call arguments and tool results this way, so a prompt rendered here
// matches the one the model was trained on byte for byte.
//
//   JinjaToJson(R"({"a":1,"b":[true,null]})")     -> {"a": 1, "b": [true, null]}
//   JinjaToJson(R"({"a":1})", 4)                   -> "{\n    \"a\": 1\n}"
//   JinjaQuote("say \"hi\"")                       -> "\"say \\\"hi\\\"\"" (tojson of a string)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvserve {

// Values nested deeper than this are not re-dumped (JinjaToJson gives nullopt): the text comes
// from clients and models, and dumping recurses.
inline constexpr int kMaxJinjaJsonDepth = 64;

// `json_text` parsed and dumped as json.dumps does; nullopt when it is not JSON or nests deeper
// than kMaxJinjaJsonDepth. `indent` < 0: one line.
std::optional<std::string> JinjaToJson(std::string_view json_text, int indent = -1);

// The deepest nesting of arrays and objects in `json_text` (brackets inside strings do not
// count); a scan, no parse, so it is safe on any input.
int JsonNestingDepth(std::string_view json_text);

// tojson of a string value: the text quoted and escaped as json.dumps does.
std::string JinjaQuote(std::string_view text);

}  // namespace kvserve
