// Gemma 4's tool text, written as its chat template's macros write it
// (../shared/models/chat-templates/google-gemma-4-31B-it.jinja): a tool's declaration
// (format_function_declaration, format_parameters) and a value in Gemma's own syntax
// (format_argument), whose strings are quoted by <|"|> and whose mappings have bare keys, sorted
// as Jinja's dictsort sorts them (case-insensitively, stable).
//
//   AppendGemma4Declaration(tool.json, out);   // declaration:NAME{description:<|"|>...<|"|>,...}
//   AppendGemma4Value(json, /*quote_keys=*/false, out);   // {city:<|"|>Paris<|"|>,days:3}
//
// The template's quirks are kept: a parameters object without "type" never closes its brace, an
// object property without "properties" lists its own non-schema keys as properties, a type that
// is a list is written as Python prints it, upper-cased ("['STRING', 'NULL']"), null is "None".
// Client text (names, descriptions, keys, strings) is appended as message text (ChatText), the
// syntax as markup. Upper-casing and dictsort's case folding are ASCII only.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "tokenizer/chat_text.h"

namespace kvserve {

// Schemas nested deeper than this are cut off (client input; the macros recurse).
inline constexpr int kMaxGemma4SchemaDepth = 32;

// A tool of a request ({"type": "function", "function": {...}}, as JSON text) as
// format_function_declaration writes it, without the <|tool>...<tool|> around it. Text that is
// not a JSON object is written as nothing.
void AppendGemma4Declaration(std::string_view tool_json, ChatText& out);

// format_argument(value, escape_keys=quote_keys): strings <|"|>quoted<|"|>, true/false, None,
// numbers as Python prints them, [a,b], {key:value} with keys sorted (and <|"|>quoted<|"|> when
// quote_keys).
void AppendGemma4Value(const nlohmann::ordered_json& value, bool quote_keys, ChatText& out);

// The members of a mapping in Jinja's dictsort order: keys compared with ASCII letters folded to
// lower case, equal keys in their order.
std::vector<nlohmann::ordered_json::const_iterator> Gemma4SortedMembers(
    const nlohmann::ordered_json& object);

}  // namespace kvserve
