#include "server/output_format.h"

namespace kvserve {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const json* Present(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// The schema at `path` of the request text, keys in the client's order.
std::string OrderedSchema(std::string_view text, std::initializer_list<const char*> path) {
  ordered_json doc = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  const ordered_json* node = &doc;
  for (const char* key : path) node = &(*node)[key];
  return node->dump();
}

std::optional<ApiError> ParseResponseFormat(const json& format, std::string_view text,
                                            OutputFormat& out) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return ApiError::BadRequest(
        "'response_format' must be an object with a 'type': \"text\", \"json_object\" or "
        "\"json_schema\"",
        "response_format");
  }
  const std::string type = format["type"].get<std::string>();
  out.field = "response_format";
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    if (format.contains("schema") && format["schema"].is_object()) {
      out.source = GrammarSource::kJsonSchema;
      out.text = OrderedSchema(text, {"response_format", "schema"});
    } else {
      out.source = GrammarSource::kJsonObject;
    }
    return std::nullopt;
  }
  if (type == "json_schema") {
    const json* spec = Present(format, "json_schema");
    if (!spec || !spec->is_object() || !spec->contains("schema") ||
        !((*spec)["schema"].is_object() || (*spec)["schema"].is_boolean())) {
      return ApiError::BadRequest(
          "'response_format.json_schema' must be an object with a 'schema' (a JSON Schema)",
          "response_format.json_schema");
    }
    out.source = GrammarSource::kJsonSchema;
    out.field = "response_format.json_schema.schema";
    out.text = OrderedSchema(text, {"response_format", "json_schema", "schema"});
    return std::nullopt;
  }
  return ApiError::BadRequest(
      "'response_format.type' must be \"text\", \"json_object\" or "
      "\"json_schema\", got \"" +
          type + "\"",
      "response_format.type");
}

}  // namespace

std::optional<ApiError> ParseOutputFormat(const json& body, std::string_view text,
                                          OutputFormat& out) {
  const json* format = Present(body, "response_format");
  const json* grammar = Present(body, "grammar");
  const json* schema = Present(body, "json_schema");
  if ((format != nullptr) + (grammar != nullptr) + (schema != nullptr) > 1) {
    return ApiError::BadRequest(
        "give at most one of 'response_format', 'grammar' and 'json_schema'", "grammar");
  }
  if (format) return ParseResponseFormat(*format, text, out);
  if (grammar) {
    if (!grammar->is_string()) {
      return ApiError::BadRequest("'grammar' must be a string of GBNF rules", "grammar");
    }
    out = OutputFormat{
        .source = GrammarSource::kGbnf, .text = grammar->get<std::string>(), .field = "grammar"};
  }
  if (schema) {
    if (!schema->is_object()) {
      return ApiError::BadRequest("'json_schema' must be a JSON Schema object", "json_schema");
    }
    out = OutputFormat{.source = GrammarSource::kJsonSchema,
                       .text = OrderedSchema(text, {"json_schema"}),
                       .field = "json_schema"};
  }
  return std::nullopt;
}

}  // namespace kvserve
