// Field readers shared by the APIs translated onto the chat route (/v1/messages, /v1/responses):
// a field is looked up by name (absent and null alike), and a field of the wrong type or value is
// a 400 whose message and param name it. Plain functions of JSON; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace kvserve {

// "'FIELD' must be EXPECTED, not VALUE", a 400 with param FIELD.
ApiError WrongField(const std::string& field, const std::string& expected,
                    const nlohmann::json& value);

// The field `name` of `object`; nullptr when it is absent or null.
const nlohmann::json* FindField(const nlohmann::json& object, const char* name);

// object[name] as a string into `out`; an error names `where`.`name` when it is not one.
std::optional<ApiError> ReadStringField(const nlohmann::json& object, const std::string& where,
                                        const char* name, std::string& out);

// The fields every translation carries over as they are: "model" (required, a string) and
// "stream" (true or false; a stream includes its usage).
std::optional<ApiError> ReadModelAndStream(const nlohmann::json& body, nlohmann::json& chat);

}  // namespace kvserve
