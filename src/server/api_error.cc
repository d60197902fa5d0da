#include "server/api_error.h"

#include "server/request_limits.h"

namespace kvserve {

ApiError ApiError::BadRequest(std::string message, std::string param) {
  return ApiError{.http_status = 400, .message = std::move(message), .param = std::move(param)};
}

ApiError ApiError::Unauthorized(std::string message) {
  return ApiError{.http_status = 401,
                  .message = std::move(message),
                  .type = "authentication_error",
                  .code = "invalid_api_key"};
}

ApiError ApiError::NotFound(std::string message, std::string code) {
  return ApiError{.http_status = 404,
                  .message = std::move(message),
                  .type = "not_found_error",
                  .code = std::move(code)};
}

ApiError ApiError::PayloadTooLarge(size_t limit_bytes) {
  return ApiError{.http_status = 413,
                  .message = "request body is larger than the limit of " +
                             std::to_string(limit_bytes) + " bytes (--max-body)",
                  .code = "payload_too_large"};
}

ApiError ApiError::TooManyRequests(std::string message, int retry_after_s) {
  return ApiError{.http_status = 429,
                  .message = std::move(message),
                  .type = "rate_limit_error",
                  .code = "queue_full",
                  .retry_after_s = retry_after_s};
}

ApiError ApiError::Unavailable(std::string message) {
  return ApiError{.http_status = 503,
                  .message = std::move(message),
                  .type = "service_unavailable",
                  .code = "unavailable",
                  .retry_after_s = 1};
}

ApiError ApiError::Internal(std::string message) {
  return ApiError{.http_status = 500, .message = std::move(message), .type = "server_error"};
}

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  error["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", error}};
}

std::string ApiError::Body() const { return DumpJson(ToJson()); }

std::optional<ApiError> ParseJsonBody(const std::string& body, nlohmann::json& out) {
  if (body.empty()) return ApiError::BadRequest("request body is empty; expected a JSON object");
  if (auto error = CheckJsonDepth(body, kMaxJsonDepth)) return error;
  try {
    out = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    return ApiError::BadRequest("request body is not valid JSON: parse error at byte " +
                                std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond double ("max_tokens": 1e400).
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    return ApiError::BadRequest("request body is not valid JSON: " + what);
  }
  if (!out.is_object()) {
    return ApiError::BadRequest(std::string("request body must be a JSON object, not ") +
                                out.type_name());
  }
  return std::nullopt;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvserve
