// Where an HTTP/1.1 request ends (RFC 9112), decided once and strictly, before httplib parses it.
// httplib 0.11 is lenient where a proxy in front of us may not be: it takes the first of two
// Content-Lengths, skips a header line that ends in a bare LF, treats only a Transfer-Encoding of
// exactly "chunked" as chunked (and then reads a body until the connection ends), and reads
// "5 garbage" as a chunk of 5 bytes. When two parsers of one byte stream disagree on where a
// request ends, the bytes after it can be made into a request that one of them never saw (request
// smuggling). So whatever could be read two ways is refused here, and the connection is closed:
//
//   RequestFraming framing = CheckRequestHead(head);  // head: request line .. blank line
//   if (framing.error) return Refuse(*framing.error);  // 400, 411 or 501; then close
//   ChunkedBodyCheck body;                              // when framing.chunked
//   size_t valid = body.Feed(bytes);                    // bytes[0, valid) are the body's, valid
//   if (body.error()) ...                               // 400 naming the fault
//
// What is refused, and why (docs/security.md, "HTTP framing", lists the answers):
// - the request line: not "METHOD SP target SP HTTP/1.x" with a token method and a target of
//   visible ASCII; HTTP versions other than 1.0 and 1.1;
// - any line end but CRLF: a bare CR or a bare LF anywhere in the head;
// - header lines: starting with SP/HTAB (obsolete line folding), without a colon, a name that is
//   not a token or has whitespace before the colon, a value with a control character (but HTAB);
// - Content-Length: not 1*DIGIT (at most 18 digits), or differing values across repeated headers
//   or in a comma list (repeats of one value are one value, RFC 9112 section 6.3);
// - Transfer-Encoding: together with Content-Length, in an HTTP/1.0 request, a final coding that
//   is not chunked (400), chunked more than once or with parameters (400), any other coding before
//   the final chunked (501: none is implemented), an empty list element;
// - Host: missing from an HTTP/1.1 request, or given more than once (RFC 9112 section 3.2);
// - POST, PUT or PATCH without Content-Length or Transfer-Encoding: 411 (httplib would read its
//   body until the connection ends).
//
// Pure functions and a small state machine; safe from any thread (one ChunkedBodyCheck per body).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace kvserve {

// A chunk-size line (size, extensions, CRLF) longer than this is refused; so are chunk extensions
// of more than kMaxChunkExtensionBytes in one body (Node.js's limit after CVE-2024-22019), since
// every extension byte is read and dropped.
inline constexpr size_t kMaxChunkLineBytes = 4096;
inline constexpr size_t kMaxChunkExtensionBytes = 16 * 1024;
// A chunk larger than 2^60 - 1 bytes (more than 15 significant hex digits) is refused as an
// overflow rather than read.
inline constexpr int kMaxChunkSizeHexDigits = 15;

struct RequestFraming {
  std::optional<ApiError> error;  // set: answer it and close the connection
  uint64_t content_length = 0;    // the body's bytes when not chunked (0 without the header)
  bool chunked = false;           // Transfer-Encoding: chunked, the one coding accepted
  bool expect_continue = false;   // Expect: 100-continue (the body follows our interim answer)
};

// Checks a whole request head: the request line, the header lines and the blank line that ends
// them (every line ending in CRLF). O(head.size()).
RequestFraming CheckRequestHead(std::string_view head);

// A chunked body (RFC 9112 section 7.1) checked as its bytes arrive, in any pieces:
//   chunk = 1*HEXDIG *( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] ) CRLF
//           data CRLF
// ending with a chunk of size 0 and an empty trailer section (trailer fields are refused:
// httplib cannot read them). Refused: non-hex or empty sizes, signs, "0x", whitespace that is not
// around an extension's ";" or "=", sizes beyond kMaxChunkSizeHexDigits, data not followed by
// CRLF, bare CR or LF, lines beyond kMaxChunkLineBytes, extensions beyond kMaxChunkExtensionBytes.
class ChunkedBodyCheck {
 public:
  // Checks `bytes`, which follow those fed before; how many of them are valid body bytes (all of
  // them, unless the body ended or a fault was found inside them). Once done() or error(), 0.
  size_t Feed(std::string_view bytes);
  // The last chunk and the blank line after it have been fed.
  bool done() const { return state_ == State::kDone; }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  enum class State { kSizeLine, kData, kDataCr, kDataLf, kTrailerLine, kDone, kFailed };

  // A complete chunk-size line (its CRLF removed): the next state, or kFailed with error_ set.
  State EndSizeLine();
  void Fail(std::string message);

  State state_ = State::kSizeLine;
  std::string line_;            // the chunk-size or trailer line being read, without its LF
  uint64_t data_left_ = 0;      // bytes of the current chunk's data still to come
  size_t extension_bytes_ = 0;  // chunk-extension bytes seen in this body
  std::optional<ApiError> error_;
};

}  // namespace kvserve
