// The framing checks of server/http_framing.h, class by class (RFC 9112): each hostile head or
// chunked body is refused with its status and a message naming the header and value, and the
// well-formed ones next to them are accepted with the framing they declare.
#include "server/http_framing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvserve {
namespace {

// A POST head with these header lines (each without its CRLF) after "Host: x".
std::string Post(const std::vector<std::string>& lines) {
  std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  for (const std::string& line : lines) head += line + "\r\n";
  return head + "\r\n";
}

// `head` is refused with `status` and a message that contains `says`.
void ExpectRefused(const std::string& head, int status, const std::string& says) {
  SCOPED_TRACE(head);
  const RequestFraming framing = CheckRequestHead(head);
  ASSERT_TRUE(framing.error);
  EXPECT_EQ(framing.error->http_status, status);
  EXPECT_NE(framing.error->message.find(says), std::string::npos) << framing.error->message;
  EXPECT_EQ(framing.error->message.find('\r'), std::string::npos);
  EXPECT_EQ(framing.error->message.find('\n'), std::string::npos);
}

RequestFraming ExpectAccepted(const std::string& head) {
  SCOPED_TRACE(head);
  const RequestFraming framing = CheckRequestHead(head);
  EXPECT_FALSE(framing.error) << framing.error->message;
  return framing;
}

TEST(HttpFramingTest, AcceptsOrdinaryHeads) {
  RequestFraming framing = ExpectAccepted(Post({"Content-Length: 42", "X-A: b\tc d", "X-E:"}));
  EXPECT_EQ(framing.content_length, 42u);
  EXPECT_FALSE(framing.chunked);
  EXPECT_FALSE(framing.expect_continue);
  framing = ExpectAccepted(Post({"transfer-encoding:  Chunked ", "Expect: 100-Continue"}));
  EXPECT_TRUE(framing.chunked);
  EXPECT_TRUE(framing.expect_continue);
  EXPECT_EQ(framing.content_length, 0u);
  framing = ExpectAccepted("GET /health?x=1 HTTP/1.1\r\nHost: x\r\nX-U: caf\xc3\xa9\r\n\r\n");
  EXPECT_EQ(framing.content_length, 0u);
  ExpectAccepted("GET / HTTP/1.0\r\n\r\n");  // HTTP/1.0 needs no Host
  ExpectAccepted("DELETE /v1/sessions/a HTTP/1.1\r\nHost: x\r\n\r\n");
  ExpectAccepted(Post({"Content-Length: 0"}));
}

TEST(HttpFramingTest, ConflictingOrRepeatedContentLength) {
  ExpectRefused(Post({"Content-Length: 5", "Content-Length: 6"}), 400,
                "Content-Length '6' differs from the earlier '5'");
  ExpectRefused(Post({"Content-Length: 5, 6"}), 400, "Content-Length '5, 6' has differing values");
  ExpectRefused(Post({"Content-Length: 5,", "X: y"}), 400, "'5,' is not a decimal number");
  ExpectRefused(Post({"Content-Length: "}), 400, "is not a decimal number");
  for (const char* bad : {"4x", "-4", "+4", "0x10", "4 4", "1e3", "99999999999999999999"}) {
    ExpectRefused(Post({std::string("Content-Length: ") + bad}), 400,
                  std::string("Content-Length '") + bad + "' is not a decimal number");
  }
  // Repeats of one value are that value (RFC 9112 section 6.3), as a list or as header lines.
  EXPECT_EQ(ExpectAccepted(Post({"Content-Length: 7", "content-length: 07"})).content_length, 7u);
  EXPECT_EQ(ExpectAccepted(Post({"Content-Length: 7 , 7,7"})).content_length, 7u);
  EXPECT_EQ(ExpectAccepted(Post({"Content-Length: 999999999999999999"})).content_length,
            999999999999999999u);
}

TEST(HttpFramingTest, TransferEncodingWithContentLength) {
  ExpectRefused(Post({"Content-Length: 5", "Transfer-Encoding: chunked"}), 400,
                "both Transfer-Encoding 'chunked' and Content-Length '5'");
  ExpectRefused(Post({"Transfer-Encoding: chunked", "Content-Length: 0"}), 400, "both");
  ExpectRefused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                "in an HTTP/1.0 request");
}

TEST(HttpFramingTest, TransferEncodingOtherThanChunked) {
  // The final coding is not chunked: the body's end cannot be found (400).
  for (const char* value :
       {"chunked, identity", "xchunked", "identity", "gzip", "chunked, gzip", "chunkedx"}) {
    ExpectRefused(Post({std::string("Transfer-Encoding: ") + value}), 400,
                  "does not end with chunked");
  }
  ExpectRefused(Post({"Transfer-Encoding: chunked, chunked"}), 400, "more than once");
  ExpectRefused(Post({"Transfer-Encoding: chunked", "Transfer-Encoding: chunked"}), 400,
                "'chunked, chunked' applies chunked more than once");
  ExpectRefused(Post({"Transfer-Encoding: chunked;q=1"}), 400, "chunked takes no parameters");
  ExpectRefused(Post({"Transfer-Encoding: , chunked"}), 400, "not a coding name: ''");
  ExpectRefused(Post({"Transfer-Encoding: chunked,"}), 400, "not a coding name");
  ExpectRefused(Post({"Transfer-Encoding: \"chunked\""}), 400, "not a coding name");
  ExpectRefused(Post({"Transfer-Encoding:"}), 400, "not a coding name");
  // A coding before the final chunked: well-formed, but none is implemented (501).
  ExpectRefused(Post({"Transfer-Encoding: gzip, chunked"}), 501, "'gzip' is not implemented");
  ExpectRefused(Post({"Transfer-Encoding: x-custom", "Transfer-Encoding: chunked"}), 501,
                "'x-custom' is not implemented");
}

TEST(HttpFramingTest, ObsoleteLineFoldingAndMalformedFieldLines) {
  ExpectRefused(Post({"X-A: b", " c"}), 400, "starts with whitespace: obsolete line folding");
  ExpectRefused(Post({"Content-Length: 5", "\t6"}), 400, "obsolete line folding");
  ExpectRefused(Post({"Content-Length : 5"}), 400,
                "whitespace between the header name and the colon");
  ExpectRefused(Post({"Transfer-Encoding\t: chunked"}), 400, "whitespace between");
  ExpectRefused(Post({"no colon here"}), 400, "has no colon");
  ExpectRefused(Post({": value"}), 400, "the header name is not a token");
  ExpectRefused(Post({"X(A): b"}), 400, "the header name is not a token");
  ExpectRefused(Post({std::string("X-A: b\0c", 8)}), 400,
                "header 'X-A' has the control character 0x00");
  ExpectRefused(Post({"X-A: b\x7f"}), 400, "control character 0x7f");
  ExpectRefused(Post({"X-A: b\x1b[31m"}), 400, "control character 0x1b");
}

TEST(HttpFramingTest, BareCrOrLfInTheHead) {
  ExpectRefused("POST / HTTP/1.1\nHost: x\r\n\r\n", 400, "the request line ends with a bare LF");
  ExpectRefused("POST / HTTP/1.1\r\nHost: x\nContent-Length: 5\r\n\r\n", 400,
                "a header line ends with a bare LF (only CRLF is a line end): 'Host: x'");
  ExpectRefused("GET / HTTP/1.1\r\nHost: x\r\n\n", 400, "bare LF");
  ExpectRefused("GET / HTTP/1.1\n\n", 400, "bare LF");
  ExpectRefused("GET / HTTP/1.1\r\nHost: x\rContent-Length: 5\r\n\r\n", 400,
                "a header line has a bare CR: 'Host: x\\x0dContent-Length: 5'");
  ExpectRefused("GET /\r HTTP/1.1\r\nHost: x\r\n\r\n", 400, "the request line has a bare CR");
  ExpectRefused("GET / HTTP/1.1\r\nHost: x\r\n", 400, "does not end with an empty line");
}

TEST(HttpFramingTest, RequestLine) {
  for (const char* line :
       {"GET  / HTTP/1.1", "GET / HTTP/1.1 ", "GET /", "GET / HTTP/1.1 x", " GET / HTTP/1.1"}) {
    SCOPED_TRACE(line);
    EXPECT_TRUE(CheckRequestHead(std::string(line) + "\r\nHost: x\r\n\r\n").error);
  }
  ExpectRefused("GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "is not METHOD SP target");
  ExpectRefused("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request method 'G(T' is not a token");
  ExpectRefused("GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400, "has the byte 0x09");
  ExpectRefused("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "has the byte 0xc3");
  ExpectRefused("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400, "HTTP version 'HTTP/2.0'");
  ExpectRefused("GET / http/1.1\r\nHost: x\r\n\r\n", 400, "HTTP version");
  ExpectRefused("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request line");
  // Garbage (a TLS ClientHello on the plain port) is refused, and quoted safely.
  ExpectRefused(std::string("\x16\x03\x01\x02\x00 x y\r\n\r\n", 13), 400, "\\x16\\x03");
}

TEST(HttpFramingTest, HostAndLengthRequired) {
  ExpectRefused("GET / HTTP/1.1\r\n\r\n", 400, "an HTTP/1.1 request without a Host header");
  ExpectRefused("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400, "2 Host headers");
  ExpectRefused("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400, "2 Host headers");
  ExpectRefused("POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 411,
                "a POST request needs Content-Length or Transfer-Encoding");
  ExpectRefused("PUT / HTTP/1.1\r\nHost: x\r\n\r\n", 411, "a PUT request");
}

TEST(HttpFramingTest, MessagesQuoteAtMost64BytesOfAValue) {
  const RequestFraming framing =
      CheckRequestHead(Post({"Content-Length: 1" + std::string(1000, 'x')}));
  ASSERT_TRUE(framing.error);
  EXPECT_LT(framing.error->message.size(), 200u) << framing.error->message;
  EXPECT_NE(framing.error->message.find("x'..."), std::string::npos) << framing.error->message;
}

// The verdict on a chunked body fed whole and byte by byte: the same valid prefix, done() and
// error; returns the whole feed's check.
ChunkedBodyCheck CheckBody(const std::string& body, size_t* valid) {
  ChunkedBodyCheck whole;
  *valid = whole.Feed(body);
  ChunkedBodyCheck bytes;
  size_t fed = 0;
  for (size_t i = 0; i < body.size() && !bytes.done() && !bytes.error(); ++i) {
    fed += bytes.Feed(std::string_view(body).substr(i, 1));
  }
  EXPECT_EQ(fed, *valid);
  EXPECT_EQ(bytes.done(), whole.done());
  EXPECT_EQ(bytes.error().has_value(), whole.error().has_value());
  return whole;
}

void ExpectBodyAccepted(const std::string& body, size_t length) {
  SCOPED_TRACE(body.substr(0, 80));
  size_t valid = 0;
  const ChunkedBodyCheck check = CheckBody(body, &valid);
  EXPECT_FALSE(check.error()) << check.error()->message;
  EXPECT_TRUE(check.done());
  EXPECT_EQ(valid, length);
}

void ExpectBodyRefused(const std::string& body, const std::string& says) {
  SCOPED_TRACE(body.substr(0, 80));
  size_t valid = 0;
  const ChunkedBodyCheck check = CheckBody(body, &valid);
  ASSERT_TRUE(check.error());
  EXPECT_EQ(check.error()->http_status, 400);
  EXPECT_NE(check.error()->message.find(says), std::string::npos) << check.error()->message;
  EXPECT_FALSE(check.done());
  EXPECT_LT(valid, body.size());
}

TEST(ChunkedBodyTest, AcceptsWellFormedBodiesAndStopsAtTheirEnd) {
  const std::string body = "5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n";
  ExpectBodyAccepted(body, body.size());
  ExpectBodyAccepted(body + "GET /next HTTP/1.1\r\n", body.size());  // the next request's bytes
  ExpectBodyAccepted("0\r\n\r\n", 5);
  ExpectBodyAccepted("000\r\n\r\n", 7);
  ExpectBodyAccepted("00000000000000000000001\r\nx\r\n0\r\n\r\n", 33);  // leading zeros
  const std::string extended = "5;name=value ; flag;q=\"a \\\" b\"\r\nhello\r\n0;last\r\n\r\n";
  ExpectBodyAccepted(extended, extended.size());
  // Incomplete: all valid so far, neither done nor refused.
  ChunkedBodyCheck partial;
  EXPECT_EQ(partial.Feed("5\r\nhel"), 6u);
  EXPECT_FALSE(partial.done());
  EXPECT_FALSE(partial.error());
}

TEST(ChunkedBodyTest, RefusesInvalidChunkSizes) {
  ExpectBodyRefused("zz\r\nhello\r\n0\r\n\r\n", "chunk size 'zz' does not start with a hex digit");
  ExpectBodyRefused("-5\r\nhello\r\n0\r\n\r\n", "does not start with a hex digit");
  ExpectBodyRefused("+5\r\nhello\r\n0\r\n\r\n", "does not start with a hex digit");
  ExpectBodyRefused(" 5\r\nhello\r\n0\r\n\r\n", "does not start with a hex digit");
  ExpectBodyRefused("\r\nhello\r\n0\r\n\r\n", "does not start with a hex digit");
  ExpectBodyRefused("0x5\r\nhello\r\n0\r\n\r\n", "'0x5' is not a hex size and chunk extensions");
  ExpectBodyRefused("5 \r\nhello\r\n0\r\n\r\n", "is not a hex size");
  ExpectBodyRefused("5 garbage\r\nhello\r\n0\r\n\r\n", "is not a hex size");
  ExpectBodyRefused("1000000000000000\r\n", "chunk size '1000000000000000' is larger than 15");
  ExpectBodyRefused("ffffffffffffffffffff\r\n", "is larger than 15 hex digits");
  ChunkedBodyCheck largest;  // 15 significant digits: accepted, its data still to come
  EXPECT_EQ(largest.Feed("0fffffffffffffff\r\nabc"), 21u);
  EXPECT_FALSE(largest.error());
}

TEST(ChunkedBodyTest, RefusesMissingCrlfAndBareLineEnds) {
  ExpectBodyRefused("5\r\nhelloX\r\n0\r\n\r\n", "a chunk's data is followed by 0x58, not CRLF");
  ExpectBodyRefused("5\r\nhello\rX0\r\n\r\n", "followed by 0x58");
  ExpectBodyRefused("5\r\nhello\n0\r\n\r\n", "followed by 0x0a, not CRLF");
  ExpectBodyRefused("3\r\nhello\r\n0\r\n\r\n", "followed by 0x6c");  // the size says 3
  ExpectBodyRefused("5\nhello\r\n0\r\n\r\n", "a line ends with a bare LF");
  ExpectBodyRefused("5\r\r\nhello\r\n0\r\n\r\n", "a line has a bare CR");
  ExpectBodyRefused("5\r\nhello\r\n0\r\n\n", "bare LF");
  ExpectBodyRefused("5\r\nhello\r\n0\n\r\n", "bare LF");
}

TEST(ChunkedBodyTest, RefusesExtensionAbuseAndTrailers) {
  ExpectBodyRefused("5;\r\nhello\r\n0\r\n\r\n", "is not a hex size and chunk extensions");
  ExpectBodyRefused("5;a=\r\nhello\r\n0\r\n\r\n", "chunk extensions");
  ExpectBodyRefused("5;a=\"open\r\nhello\r\n0\r\n\r\n", "chunk extensions");
  ExpectBodyRefused("5;a=b c\r\nhello\r\n0\r\n\r\n", "chunk extensions");
  ExpectBodyRefused("5;a\x01\r\nhello\r\n0\r\n\r\n", "chunk extensions");
  // One line beyond kMaxChunkLineBytes, refused before its end arrives.
  ExpectBodyRefused("5;a=" + std::string(kMaxChunkLineBytes, 'x'), "longer than 4096 bytes");
  // Many lines within it, together beyond kMaxChunkExtensionBytes.
  std::string many;
  const std::string extension = ";a=" + std::string(1000, 'x');
  for (int i = 0; i < 20; ++i) many += "1" + extension + "\r\nx\r\n";
  ExpectBodyRefused(many + "0\r\n\r\n", "chunk extensions exceed 16384 bytes");
  ExpectBodyRefused("5\r\nhello\r\n0\r\nX-Trailer: v\r\n\r\n",
                    "trailer fields are not accepted: 'X-Trailer: v'");
}

}  // namespace
}  // namespace kvserve
