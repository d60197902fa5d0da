// What a completion request asks its output to be (structured output): `response_format`
// (OpenAI's {"type": "text" | "json_object" | "json_schema"}, and llama.cpp's json_object with a
// "schema"), `grammar` (llama.cpp's GBNF text) or `json_schema` (llama.cpp's field: a schema).
// At most one of them. The schema is read from the request text again as an ordered document, so
// that the properties keep the client's order (nlohmann::json sorts keys).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/grammar_cache.h"
#include "server/api_error.h"

namespace kvserve {

struct OutputFormat {
  std::optional<GrammarSource> source;  // nullopt: free text
  std::string text;                     // GBNF, or a schema as JSON text
  std::string field;                    // where it came from ("response_format", "grammar", ...)
};

// Fills `out` from the request `body` (parsed) and its `text` (raw); a malformed or conflicting
// field is a 400 naming it.
std::optional<ApiError> ParseOutputFormat(const nlohmann::json& body, std::string_view text,
                                          OutputFormat& out);

}  // namespace kvserve
