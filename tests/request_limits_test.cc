// The checks a request meets before parsing (server/request_limits.h): JSON nesting depth and the
// scan of a request head (its end, its size, line count and line length limits). Its framing is
// tests/http_framing_test.cc's.
#include "server/request_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace kvserve {
namespace {

TEST(JsonDepthTest, CountsBracketsOutsideStrings) {
  EXPECT_FALSE(CheckJsonDepth("", 1));
  EXPECT_FALSE(CheckJsonDepth("{\"a\":[1,2,{\"b\":3}]}", 3));
  EXPECT_TRUE(CheckJsonDepth("{\"a\":[1,2,{\"b\":3}]}", 2));
  EXPECT_FALSE(CheckJsonDepth("[[]][[]][[]]", 2));  // depth, not count
  EXPECT_FALSE(CheckJsonDepth("{\"a\":\"[[[[[[\"}", 1));
  EXPECT_FALSE(CheckJsonDepth("{\"a\":\"\\\"[[[[\"}", 1));  // an escaped quote stays in the string
  EXPECT_TRUE(CheckJsonDepth("{\"a\":\"\\\\\"[[[[}", 2));   // an escaped backslash ends it
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto error = CheckJsonDepth(deep, kMaxJsonDepth);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->http_status, 400);
  EXPECT_NE(error->message.find("at byte 64"), std::string::npos) << error->message;
  EXPECT_FALSE(CheckJsonDepth(std::string(64, '[') + std::string(64, ']'), kMaxJsonDepth));
  EXPECT_FALSE(CheckJsonDepth("]]]]]][", 1));  // unbalanced: the parser's to report
}

TEST(JsonDepthTest, ParseJsonBodyRefusesDepthAndOverflowWithout500) {
  nlohmann::json out;
  for (const std::string& body :
       {std::string(100000, '['), "{\"a\":" + std::string(100000, '{'),
        std::string("{\"max_tokens\":1e400}"), std::string("{\"x\":-1e99999}"),
        std::string("{\"x\":") + std::string(100000, '9') + "e99999}"}) {
    auto error = ParseJsonBody(body, out);
    ASSERT_TRUE(error) << body.substr(0, 40);
    EXPECT_EQ(error->http_status, 400);
    EXPECT_LE(error->message.size(), 300u);
  }
  EXPECT_FALSE(ParseJsonBody("{\"max_tokens\":1e300}", out));
}

TEST(RequestHeadTest, FindsTheEnd) {
  HeadScan scan = ScanRequestHead("GET / HTTP/1.1\r\nHost: x\r\n");
  EXPECT_EQ(scan.end, 0u);
  EXPECT_FALSE(scan.error);
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-length:  42 \r\n"
      "Expect: 100-continue\r\n\r\n";
  scan = ScanRequestHead(head + "{\"body\"");
  EXPECT_EQ(scan.end, head.size());
  EXPECT_EQ(scan.lines, 3);
  // Split at LF: a head with bare LFs ends here too, for server/http_framing.h to refuse.
  scan = ScanRequestHead("POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n");
  EXPECT_EQ(scan.end, 44u);
}

TEST(RequestHeadTest, RefusesTooManyOrTooLargeHeaders) {
  std::string head = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < kMaxHeaderCount; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_FALSE(ScanRequestHead(head + "\r\n").error);
  HeadScan scan = ScanRequestHead(head + "X-last: v\r\n");  // before the head is even complete
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 431);
  EXPECT_EQ(scan.end, 0u);
  scan = ScanRequestHead("GET / HTTP/1.1\r\nX: " + std::string(kMaxHeaderBytes, 'a'));
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 431);
  EXPECT_FALSE(
      ScanRequestHead("GET / HTTP/1.1\r\nX: " + std::string(1000, 'a') + "\r\n\r\n").error);
}

TEST(RequestHeadTest, RefusesLongLinesBeforeTheyEnd) {
  // A request line of exactly kMaxRequestLineBytes with its CRLF is accepted; one more byte is
  // 414, even before its line end has arrived.
  const std::string target(kMaxRequestLineBytes - std::string("GET / HTTP/1.1\r\n").size(), 'p');
  EXPECT_FALSE(ScanRequestHead("GET /" + target + " HTTP/1.1\r\nHost: x\r\n\r\n").error);
  HeadScan scan = ScanRequestHead("GET /" + target + "p HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 414);
  scan = ScanRequestHead("GET /" + std::string(kMaxRequestLineBytes, 'p'));
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 414);
  EXPECT_FALSE(ScanRequestHead("GET /" + std::string(kMaxRequestLineBytes - 6, 'p')).error);
  // A header line likewise, with 431.
  const std::string value(kMaxHeaderLineBytes - std::string("X: \r\n").size(), 'v');
  EXPECT_FALSE(ScanRequestHead("GET / HTTP/1.1\r\nX: " + value + "\r\n\r\n").error);
  scan = ScanRequestHead("GET / HTTP/1.1\r\nX: " + value + "v\r\n\r\n");
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 431);
  scan = ScanRequestHead("GET / HTTP/1.1\r\nX: " + value + "vv");
  ASSERT_TRUE(scan.error);
  EXPECT_EQ(scan.error->http_status, 431);
}

}  // namespace
}  // namespace kvserve
