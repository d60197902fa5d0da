#include "server/http_framing.h"

#include <algorithm>

namespace kvserve {

namespace {

constexpr size_t kQuoteBytes = 64;  // of a value quoted in a message
constexpr int kMaxLengthDigits = 18;

bool IsSpace(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// RFC 9110 section 5.6.2: tchar.
bool IsTokenChar(char c) {
  if (IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A field value's byte (RFC 9110 section 5.5): visible ASCII, SP, HTAB or obs-text.
bool IsFieldValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == '\t' || (u >= 0x20 && u != 0x7f);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x) ==
                  (y >= 'A' && y <= 'Z' ? y - 'A' + 'a' : y);
         });
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string Hex(char c) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return std::string("0x") + kDigits[u >> 4] + kDigits[u & 15];
}

// `text` for a message: in single quotes, at most kQuoteBytes, bytes outside printable ASCII as
// \xNN, so a message never carries a line end or a control character back to the client.
std::string Quote(std::string_view text) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < kQuoteBytes; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x20 && u < 0x7f && text[i] != '\\') {
      out += text[i];
    } else {
      out += "\\x" + Hex(text[i]).substr(2);
    }
  }
  return out + (text.size() > kQuoteBytes ? "'..." : "'");
}

ApiError Framing(std::string message, int status = 400) {
  return ApiError{.http_status = status, .message = std::move(message), .code = "invalid_framing"};
}

// What the header lines said about the body, gathered line by line.
struct HeadFields {
  std::string_view method;
  bool http10 = false;
  std::optional<uint64_t> content_length;
  std::string_view content_length_text;  // the first Content-Length value, for messages
  std::string transfer_encoding;         // every Transfer-Encoding value, joined with ", "
  bool has_transfer_encoding = false;
  int hosts = 0;
  bool expect_continue = false;
};

// "METHOD SP request-target SP HTTP-version" (RFC 9112 section 3), exactly.
std::optional<ApiError> ReadRequestLine(std::string_view line, HeadFields& fields) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    return Framing("request line " + Quote(line) + " is not METHOD SP target SP HTTP-version");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Framing("request method " + Quote(method) + " is not a token");
  if (target.empty()) return Framing("request line " + Quote(line) + " has an empty target");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return Framing("request target " + Quote(target) + " has the byte " + Hex(c));
    }
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Framing("HTTP version " + Quote(version) + " is not HTTP/1.1 or HTTP/1.0");
  }
  fields.method = method;
  fields.http10 = version == "HTTP/1.0";
  return std::nullopt;
}

// One Content-Length value: 1*DIGIT, or a list of equal ones ("5, 5"); equal to earlier ones.
std::optional<ApiError> ReadContentLength(std::string_view value, HeadFields& fields) {
  std::optional<uint64_t> length;
  std::string_view rest = value;
  for (bool more = true; more;) {
    const size_t comma = rest.find(',');
    const std::string_view element = TrimSpace(rest.substr(0, comma));
    if (element.empty() || element.size() > kMaxLengthDigits ||
        !std::all_of(element.begin(), element.end(), IsDigit)) {
      return Framing("Content-Length " + Quote(value) + " is not a decimal number of at most " +
                     std::to_string(kMaxLengthDigits) + " digits");
    }
    uint64_t n = 0;
    for (char c : element) n = n * 10 + static_cast<uint64_t>(c - '0');
    if (length && *length != n) {
      return Framing("Content-Length " + Quote(value) + " has differing values");
    }
    length = n;
    more = comma != std::string_view::npos;
    if (more) rest = rest.substr(comma + 1);
  }
  if (fields.content_length && *fields.content_length != *length) {
    return Framing("Content-Length " + Quote(value) + " differs from the earlier " +
                   Quote(fields.content_length_text) +
                   ": the body's length is ambiguous (RFC 9112 section 6.3)");
  }
  if (!fields.content_length) fields.content_length_text = value;
  fields.content_length = length;
  return std::nullopt;
}

// One header line (without its CRLF; not the request line) into `fields`.
std::optional<ApiError> ReadFieldLine(std::string_view line, int number, HeadFields& fields) {
  const std::string where = "header line " + std::to_string(number) + " " + Quote(line);
  if (IsSpace(line.front())) {
    return Framing(where + " starts with whitespace: obsolete line folding is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Framing(where + " has no colon");
  const std::string_view name = line.substr(0, colon);
  if (!name.empty() && IsSpace(name.back())) {
    return Framing(where + ": whitespace between the header name and the colon");
  }
  if (!IsToken(name)) return Framing(where + ": the header name is not a token");
  const std::string_view value = TrimSpace(line.substr(colon + 1));
  for (char c : value) {
    if (!IsFieldValueChar(c)) {
      return Framing("header " + Quote(name) + " has the control character " + Hex(c) +
                     " in its value");
    }
  }
  if (EqualsIgnoreCase(name, "Content-Length")) return ReadContentLength(value, fields);
  if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    if (fields.has_transfer_encoding) fields.transfer_encoding += ", ";
    fields.transfer_encoding += value;
    fields.has_transfer_encoding = true;
  } else if (EqualsIgnoreCase(name, "Host")) {
    ++fields.hosts;
  } else if (EqualsIgnoreCase(name, "Expect")) {
    fields.expect_continue = EqualsIgnoreCase(value, "100-continue");
  }
  return std::nullopt;
}

// The Transfer-Encoding list (all its headers joined): exactly one "chunked", last, without
// parameters, and nothing before it (no other coding is implemented).
std::optional<ApiError> CheckTransferCoding(std::string_view list) {
  const std::string what = "Transfer-Encoding " + Quote(list);
  int chunked = 0;
  std::string_view other;  // the first coding that is not chunked
  std::string_view last;
  std::string_view rest = list;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view element = TrimSpace(rest.substr(0, comma));
    const std::string_view name = TrimSpace(element.substr(0, element.find(';')));
    if (!IsToken(name)) {
      return Framing(what + " has an element that is not a coding name: " + Quote(element));
    }
    if (EqualsIgnoreCase(name, "chunked")) {
      if (name.size() != element.size()) return Framing(what + ": chunked takes no parameters");
      ++chunked;
    } else if (other.empty()) {
      other = name;
    }
    last = name;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (!EqualsIgnoreCase(last, "chunked")) {
    return Framing(what + " does not end with chunked: the body's length cannot be determined " +
                   "(RFC 9112 section 6.3)");
  }
  if (chunked > 1) return Framing(what + " applies chunked more than once");
  if (!other.empty()) {
    return Framing(
        what + ": the transfer coding " + Quote(other) + " is not implemented (only chunked is)",
        501);
  }
  return std::nullopt;
}

// The body's framing from what the header lines said (RFC 9112 sections 3.2, 6.1, 6.3).
RequestFraming Decide(const HeadFields& fields) {
  RequestFraming framing;
  if (fields.has_transfer_encoding) {
    const std::string what = "Transfer-Encoding " + Quote(fields.transfer_encoding);
    if (fields.content_length) {
      framing.error =
          Framing("both " + what + " and Content-Length " + Quote(fields.content_length_text) +
                  ": the body's length is ambiguous (RFC 9112 section 6.1)");
    } else if (fields.http10) {
      framing.error = Framing(what + " in an HTTP/1.0 request");
    } else {
      framing.error = CheckTransferCoding(fields.transfer_encoding);
    }
    framing.chunked = !framing.error;
  } else if (!fields.content_length &&
             (fields.method == "POST" || fields.method == "PUT" || fields.method == "PATCH")) {
    framing.error = ApiError{.http_status = 411,
                             .message = "a " + std::string(fields.method) +
                                        " request needs Content-Length or Transfer-Encoding",
                             .code = "length_required"};
  }
  if (!framing.error && fields.hosts != 1 && (fields.hosts > 1 || !fields.http10)) {
    framing.error = Framing(fields.hosts == 0 ? "an HTTP/1.1 request without a Host header"
                                              : "a request with " + std::to_string(fields.hosts) +
                                                    " Host headers");
  }
  framing.content_length = fields.content_length.value_or(0);
  framing.expect_continue = fields.expect_continue;
  return framing;
}

}  // namespace

RequestFraming CheckRequestHead(std::string_view head) {
  HeadFields fields;
  size_t start = 0;
  for (int number = 0;; ++number) {
    const size_t lf = head.find('\n', start);
    if (lf == std::string_view::npos) {
      return {.error = Framing("the request head does not end with an empty line")};
    }
    const std::string_view where = number == 0 ? "the request line" : "a header line";
    if (lf == start || head[lf - 1] != '\r') {
      return {.error = Framing(std::string(where) + " ends with a bare LF (only CRLF is a line " +
                               "end): " + Quote(head.substr(start, lf - start)))};
    }
    const std::string_view line = head.substr(start, lf - 1 - start);
    if (line.find('\r') != std::string_view::npos) {
      return {.error = Framing(std::string(where) + " has a bare CR: " + Quote(line))};
    }
    start = lf + 1;
    std::optional<ApiError> error;
    if (number == 0) {
      error = ReadRequestLine(line, fields);
    } else if (line.empty()) {
      return Decide(fields);
    } else {
      error = ReadFieldLine(line, number, fields);
    }
    if (error) return {.error = std::move(error)};
  }
}

void ChunkedBodyCheck::Fail(std::string message) {
  error_ = Framing("chunked body: " + std::move(message));
  state_ = State::kFailed;
}

namespace {

// The rest of a chunk-size line after the size: *( BWS ";" BWS token [ BWS "=" BWS ( token /
// quoted-string ) ] ) (RFC 9112 section 7.1.1).
bool IsChunkExtensionList(std::string_view s) {
  size_t p = 0;
  auto skip_space = [&] {
    while (p < s.size() && IsSpace(s[p])) ++p;
  };
  auto token = [&] {
    const size_t from = p;
    while (p < s.size() && IsTokenChar(s[p])) ++p;
    return p > from;
  };
  auto quoted = [&] {
    if (p >= s.size() || s[p] != '"') return false;
    for (++p; p < s.size(); ++p) {
      if (s[p] == '"') {
        ++p;
        return true;
      }
      if (s[p] == '\\') ++p;  // quoted-pair: the next byte, whatever it is but a control
      if (p >= s.size() || !IsFieldValueChar(s[p])) return false;
    }
    return false;
  };
  while (p < s.size()) {
    skip_space();
    if (p >= s.size() || s[p] != ';') return false;
    ++p;
    skip_space();
    if (!token()) return false;
    const size_t after_name = p;
    skip_space();
    if (p < s.size() && s[p] == '=') {
      ++p;
      skip_space();
      if (!token() && !quoted()) return false;
    } else {
      p = after_name;
    }
  }
  return true;
}

}  // namespace

ChunkedBodyCheck::State ChunkedBodyCheck::EndSizeLine() {
  const std::string_view line = line_;
  size_t digits = 0;
  while (digits < line.size() && IsHex(line[digits])) ++digits;
  const std::string_view size = line.substr(0, digits);
  const std::string_view significant = size.substr(std::min(size.find_first_not_of('0'), digits));
  if (digits == 0) {
    Fail("chunk size " + Quote(line) + " does not start with a hex digit");
  } else if (significant.size() > static_cast<size_t>(kMaxChunkSizeHexDigits)) {
    Fail("chunk size " + Quote(size) + " is larger than " + std::to_string(kMaxChunkSizeHexDigits) +
         " hex digits");
  } else if (!IsChunkExtensionList(line.substr(digits))) {
    Fail("chunk-size line " + Quote(line) + " is not a hex size and chunk extensions");
  } else {
    extension_bytes_ += line.size() - digits;
    if (extension_bytes_ > kMaxChunkExtensionBytes) {
      Fail("chunk extensions exceed " + std::to_string(kMaxChunkExtensionBytes) + " bytes");
    }
  }
  if (error_) return State::kFailed;
  data_left_ = 0;
  for (char c : significant) {
    data_left_ =
        data_left_ * 16 + static_cast<uint64_t>(IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return data_left_ == 0 ? State::kTrailerLine : State::kData;
}

size_t ChunkedBodyCheck::Feed(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && state_ != State::kDone && state_ != State::kFailed) {
    const char c = bytes[i];
    if (state_ == State::kData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(data_left_, bytes.size() - i));
      i += n;
      data_left_ -= n;
      if (data_left_ == 0) state_ = State::kDataCr;
    } else if (state_ == State::kDataCr || state_ == State::kDataLf) {
      if (c != (state_ == State::kDataCr ? '\r' : '\n')) {
        Fail("a chunk's data is followed by " + Hex(c) + ", not CRLF");
        break;
      }
      ++i;
      state_ = state_ == State::kDataCr ? State::kDataLf : State::kSizeLine;
    } else if (c != '\n') {  // kSizeLine, kTrailerLine: the line so far
      if (line_.size() + 2 > kMaxChunkLineBytes) {
        Fail("a chunk-size or trailer line is longer than " + std::to_string(kMaxChunkLineBytes) +
             " bytes");
        break;
      }
      line_ += c;
      ++i;
    } else {
      if (line_.empty() || line_.back() != '\r') {
        Fail("a line ends with a bare LF: " + Quote(line_));
        break;
      }
      line_.pop_back();
      if (line_.find('\r') != std::string::npos) {
        Fail("a line has a bare CR: " + Quote(line_));
        break;
      }
      State next = State::kDone;
      if (state_ == State::kSizeLine) {
        next = EndSizeLine();
      } else if (!line_.empty()) {
        Fail("trailer fields are not accepted: " + Quote(line_));
      }
      if (error_) break;
      line_.clear();
      ++i;
      state_ = next;
    }
  }
  return i;
}

}  // namespace kvserve
