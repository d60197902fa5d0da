// Reads a grammar in llama.cpp's GBNF notation (its grammars/README.md is the spec):
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= string ":" ws value          # comments run to the end of the line
//   string ::= "\"" [^"\\]* "\""
//   ws     ::= [ \t\n]{0,20}
//
// Elements: "literal", [character class] and [^negated class] (ranges a-z; escapes \n \r \t
// \\ \" \] \- \xHH \uHHHH \UHHHHHHHH), . (any character), rule names, ( groups ), and the
// repetitions * + ? {m} {m,} {m,n}. A rule ends at the end of its line unless inside parentheses
// or after |. Errors name the line and column and what was expected; every limit of
// GrammarLimits is checked before the work it bounds.
#pragma once

#include <memory>
#include <string_view>

#include "grammar/grammar.h"
#include "util/status.h"

namespace kvserve {

// The grammar of `text`, starting at rule "root".
Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits = {});

}  // namespace kvserve
