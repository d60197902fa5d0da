// An HTTP error in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with the HTTP
// status it travels with. Route code returns these instead of throwing; the message names the
// parameter and the bad value.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kvserve {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;      // "" -> null
  std::string code;       // "" -> null
  int retry_after_s = 0;  // > 0: sent as Retry-After (429, 503)

  static ApiError BadRequest(std::string message, std::string param = "");
  static ApiError Unauthorized(std::string message);
  static ApiError NotFound(std::string message, std::string code = "not_found");
  static ApiError PayloadTooLarge(size_t limit_bytes);
  static ApiError TooManyRequests(std::string message, int retry_after_s);
  static ApiError Unavailable(std::string message);
  static ApiError Internal(std::string message);

  nlohmann::json ToJson() const;
  // ToJson() as text; invalid UTF-8 in the message is replaced, never thrown on.
  std::string Body() const;
};

// Parses a JSON body; an error says where parsing stopped. Never throws.
std::optional<ApiError> ParseJsonBody(const std::string& body, nlohmann::json& out);

// json::dump that replaces invalid UTF-8 (token pieces may be partial characters).
std::string DumpJson(const nlohmann::json& value);

}  // namespace kvserve
