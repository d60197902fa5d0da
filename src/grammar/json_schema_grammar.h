// JSON Schema to GBNF: the grammar of the JSON documents a schema describes, for
// `response_format: {"type": "json_schema"}` and for tool calls' arguments.
//
// Supported (OpenAI's strict-mode subset and more): type (one or a list), object with properties
// (written in the schema's order; the required ones always, the others optionally),
// additionalProperties (false unless true or a schema is given), array with items, prefixItems,
// minItems and maxItems, string with minLength, maxLength, pattern (grammar/regex_gbnf.h), enum,
// const, format "date", "time", "date-time" and "uuid", integer with minimum, maximum and their
// exclusive forms (exact digit grammars), number with minimum >= 0 (no sign), boolean, null, anyOf,
// oneOf (as anyOf), allOf of one schema, $ref to "#", "#/$defs/..." or "#/definitions/..."
// (recursion allowed), and the empty schema {} (any JSON value). Annotations (title, description,
// default, examples, $schema, $id) are ignored. Anything else is refused with a message naming
// the keyword and where it is ("schema.properties.age: 'multipleOf' is not supported"), as are
// schemas beyond the limits.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "grammar/grammar.h"
#include "util/status.h"

namespace kvserve {

// GBNF text whose rule "root" matches the documents of `schema` (an ordered_json keeps the order
// in which the client wrote the properties, which is the order members are written in), with
// optional whitespace between tokens (at most one space, or a line break and up to 20 spaces or
// tabs).
// `root_rule` names the document's rule (another name lets a caller put the document inside a
// grammar of its own, whose root it then writes).
Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const GrammarLimits& limits = {},
                                     const std::string& root_rule = "root");

// One document of JsonSchemaRulesToGbnf: `rule` ::= a JSON document of `schema` (no whitespace
// around it), a part of `root` (the schema its $refs are resolved against: for a tool
// parameter, the tool's parameters schema). `where` names it in errors ("tools[0].city").
struct JsonSchemaRule {
  std::string rule;
  const nlohmann::ordered_json* root;
  const nlohmann::ordered_json* schema;
  std::string where;
};
// Several documents in one grammar text, sharing their helper rules; no "root" rule (the caller
// writes it). The rule names must not be those of JSON's helpers (ws, string, value, ...).
Result<std::string> JsonSchemaRulesToGbnf(std::span<const JsonSchemaRule> documents,
                                          const GrammarLimits& limits = {});

// The grammar of `response_format: {"type": "json_object"}`: any JSON object.
std::string JsonObjectGbnf();

}  // namespace kvserve
