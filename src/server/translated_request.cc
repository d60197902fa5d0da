#include "server/translated_request.h"

namespace kvserve {

using nlohmann::json;

ApiError WrongField(const std::string& field, const std::string& expected, const json& value) {
  return ApiError::BadRequest("'" + field + "' must be " + expected + ", not " + DumpJson(value),
                              field);
}

const json* FindField(const json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> ReadStringField(const json& object, const std::string& where,
                                        const char* name, std::string& out) {
  const json* value = FindField(object, name);
  if (value == nullptr || !value->is_string()) {
    return WrongField(where + "." + name, "a string", value ? *value : json());
  }
  out = value->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ReadModelAndStream(const json& body, json& chat) {
  const json* model = FindField(body, "model");
  if (model == nullptr || !model->is_string()) {
    return WrongField("model", "a string", model ? *model : json());
  }
  chat["model"] = *model;
  if (const json* stream = FindField(body, "stream")) {
    if (!stream->is_boolean()) return WrongField("stream", "true or false", *stream);
    chat["stream"] = *stream;
    if (stream->get<bool>()) chat["stream_options"] = {{"include_usage", true}};
  }
  return std::nullopt;
}

}  // namespace kvserve
