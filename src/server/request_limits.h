// The limits a request meets before it is parsed or queued, in one place: the shape of the HTTP
// head (header count and bytes), the nesting depth of a JSON body, and the numbers docs/api.md and
// docs/security.md quote. What each check refuses is an ApiError that names the limit.
//
//   if (auto error = CheckJsonDepth(body, kMaxJsonDepth)) return ReplyError(response, *error);
//
// Everything here is a pure function of its arguments; safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "server/api_error.h"

namespace kvserve {

// A JSON body nested deeper than this is refused before nlohmann::json sees it: its parser is
// iterative, but copying, comparing and printing a value recurse once per level, so a body of
// 100,000 '[' would overflow an HTTP thread's stack. OpenAI's own bodies nest at most ~6 deep.
inline constexpr int kMaxJsonDepth = 64;

// The request line and header block together, and the number of header lines. Beyond either
// the request gets 431 and the connection is closed.
inline constexpr size_t kMaxHeaderBytes = 32 * 1024;
inline constexpr int kMaxHeaderCount = 100;
// One line with its CRLF: the request line (beyond it 414) and each header line (beyond it 431).
// httplib's own limits (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH, CPPHTTPLIB_HEADER_MAX_LENGTH), which
// the listener now meets first, so that it can close the connection.
inline constexpr size_t kMaxRequestLineBytes = 8192;
inline constexpr size_t kMaxHeaderLineBytes = 8192;

// The first place where `body` nests objects and arrays deeper than `max_depth`, as a 400 that
// gives the byte offset; nullopt when it does not. Strings (with their escapes) are skipped, so
// brackets inside them do not count. Malformed JSON is left to the parser: this only counts.
// O(body.size()), no allocation.
std::optional<ApiError> CheckJsonDepth(std::string_view body, int max_depth);

// Where a request's head (request line and headers) ends in `data`: the offset just past the
// blank line, 0 while it is incomplete, and a 414 or 431 as soon as it is beyond a limit above
// (a line beyond its limit before its end has arrived). Lines are split at LF here; what a head
// may contain (CRLF only, among much else) is server/http_framing.h's to check.
struct HeadScan {
  size_t end = 0;  // 0: not complete yet
  std::optional<ApiError> error;
  int lines = 0;  // header lines, without the request line
};
HeadScan ScanRequestHead(std::string_view data);

}  // namespace kvserve
