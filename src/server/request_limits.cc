#include "server/request_limits.h"

#include <string>

namespace kvserve {

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

ApiError HeadTooLarge(std::string message) {
  return ApiError{
      .http_status = 431, .message = std::move(message), .code = "request_header_fields_too_large"};
}

// One header line (without its line end) into `scan`.
void ReadHeaderLine(std::string_view line, HeadScan& scan) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = Trim(line.substr(0, colon));
  const std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsIgnoreCase(name, "Content-Length")) {
    size_t length = 0;
    bool digits = !value.empty() && value.size() <= 18;
    for (char c : value) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) length = length * 10 + static_cast<size_t>(c - '0');
    }
    if (!digits) {
      scan.bad_length = true;
    } else if (!scan.content_length) {
      scan.content_length = length;  // httplib reads the first one
    }
  } else if (EqualsIgnoreCase(name, "Expect")) {
    scan.expect_continue = EqualsIgnoreCase(value, "100-continue");
  } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    for (size_t i = 0; i + 7 <= value.size(); ++i) {
      if (EqualsIgnoreCase(value.substr(i, 7), "chunked")) scan.chunked = true;
    }
  }
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
    ReadHeaderLine(line, scan);
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
