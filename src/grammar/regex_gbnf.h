// A regular expression (the JSON Schema `pattern` subset: ECMA-262 without backreferences or
// lookaround) as a GBNF expression over the characters of a JSON string's content.
//
// Supported: literals, escapes (\d \w \s \D \W \S \n \r \t \f \v \\ \. \uXXXX and other escaped
// punctuation), . (any character but a line break), classes [a-z0-9_] and [^...], groups ( ) and
// (?: ), alternation |, repetitions * + ? {m} {m,} {m,n} (lazy forms match the same strings), and
// ^ $ at the ends. A pattern without ^ (or $) may have any text before (or after) its match, as
// JSON Schema says. Characters a JSON string must escape (", \ and control characters) are never
// produced. Refused, with a message naming the pattern: backreferences, lookaround, a repetition of
// something that can match the empty string ("(a*)*"), nesting beyond the limits.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "util/status.h"

namespace kvserve {

Result<std::string> RegexToGbnf(std::string_view pattern, const GrammarLimits& limits = {});

// The GBNF text of a literal (quoted, escaped) and of a character class body.
std::string GbnfLiteral(std::string_view text);

}  // namespace kvserve
