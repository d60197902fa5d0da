#include "server/request_limits.h"

#include <string>

namespace kvserve {

namespace {

ApiError HeadTooLarge(std::string message) {
  return ApiError{
      .http_status = 431, .message = std::move(message), .code = "request_header_fields_too_large"};
}

// A line of `length` bytes with its line end, or at least that many when it has not ended yet,
// against its limit: the request line's (414) or a header line's (431).
std::optional<ApiError> CheckLineLength(size_t length, bool request_line) {
  const size_t limit = request_line ? kMaxRequestLineBytes : kMaxHeaderLineBytes;
  if (length <= limit) return std::nullopt;
  if (request_line) {
    return ApiError{
        .http_status = 414,
        .message = "the request line is longer than " + std::to_string(limit) + " bytes",
        .code = "uri_too_long"};
  }
  return HeadTooLarge("a header line is longer than " + std::to_string(limit) + " bytes");
}

}  // namespace

std::optional<ApiError> CheckJsonDepth(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return ApiError::BadRequest("request body nests arrays and objects deeper than " +
                                    std::to_string(max_depth) + " levels (at byte " +
                                    std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;  // unbalanced input is the parser's to report
    }
  }
  return std::nullopt;
}

HeadScan ScanRequestHead(std::string_view data) {
  HeadScan scan;
  size_t start = 0;
  bool request_line = true;
  while (start < data.size()) {
    const size_t newline = data.find('\n', start);
    // An unfinished line counts its line end to come.
    const size_t length = (newline == std::string_view::npos ? data.size() : newline) + 1 - start;
    if (auto error = CheckLineLength(length, request_line)) {
      scan.error = std::move(error);
      return scan;
    }
    if (newline == std::string_view::npos) break;
    std::string_view line = data.substr(start, newline - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = newline + 1;
    if (request_line) {
      request_line = false;
      continue;
    }
    if (line.empty()) {
      scan.end = start;
      break;
    }
    if (++scan.lines > kMaxHeaderCount) {
      scan.error = HeadTooLarge("request has more than " + std::to_string(kMaxHeaderCount) +
                                " header lines");
      return scan;
    }
  }
  const size_t head_bytes = scan.end > 0 ? scan.end : data.size();
  if (head_bytes > kMaxHeaderBytes) {
    scan.error = HeadTooLarge("request line and headers are larger than " +
                              std::to_string(kMaxHeaderBytes) + " bytes");
    scan.end = 0;
  }
  return scan;
}

}  // namespace kvserve
