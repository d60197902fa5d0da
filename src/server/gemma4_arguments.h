// A Gemma 4 tool call's arguments, in the syntax its chat template writes them and the model
// answers with, as JSON:
//
//   {city:<|"|>Paris<|"|>,days:3,tags:[<|"|>food<|"|>],flexible:true,budget:null}
//     -> {"city":"Paris","days":3,"tags":["food"],"flexible":true,"budget":null}
//
// A mapping is "{" KEY ":" VALUE ("," KEY ":" VALUE)* "}" whose keys are bare (any text without
// ':' and '}', whitespace around it dropped) or <|"|>quoted<|"|>; a value is a string quoted by
// <|"|> (its text taken as it is: no escapes), a mapping, a list "[" VALUE ("," VALUE)* "]", a
// JSON number, true, false, null, or None (what the template writes for null). Whitespace is
// allowed between the parts. The keys keep the model's order (a repeated key keeps its first place
// and its last value); invalid UTF-8 in keys and strings becomes U+FFFD.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvserve {

// The compact JSON text of the mapping `text` (the whole of it, whitespace around it allowed), or
// nullopt when it is not one: malformed, or nested deeper than kMaxJinjaJsonDepth.
std::optional<std::string> Gemma4ArgumentsJson(std::string_view text);

}  // namespace kvserve
