// `kvserve serve` against hostile clients (issue 17): malformed and truncated JSON, wrong types
// for every field, numbers at and beyond their limits, huge stop lists and strings, invalid UTF-8,
// token ids out of range, oversized heads and bodies, slow clients, clients that never read their
// stream, more connections than threads, requests after shutdown starts. Each gets a 4xx/503 with
// an OpenAI-style error (or a closed connection where HTTP says so), and after each the server
// still answers a normal request with the same tokens as before.
#include <poll.h>

#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

const json kNormal = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// What the server sends until it closes the connection or `wait_ms` passes without a byte.
std::string ReadUntilClosed(int fd, int wait_ms) {
  std::string text;
  char buffer[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, wait_ms) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// The first line the server sends (without its CRLF), or what came before `wait_ms` passed without
// a byte; reads at most one buffer past it.
std::string ReadFirstLine(int fd, int wait_ms) {
  std::string text;
  char buffer[256];
  while (text.find("\r\n") == std::string::npos) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, wait_ms) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text.substr(0, text.find("\r\n"));
}

// One response: until its head and Content-Length body are in, the server closes, or `wait_ms`
// passes without a byte.
std::string ReadResponse(int fd, int wait_ms) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const size_t head = text.find("\r\n\r\n");
    if (head != std::string::npos) {
      const size_t at = text.find("Content-Length: ");
      if (at != std::string::npos && at < head &&
          text.size() >= head + 4 + std::stoul(text.substr(at + 16))) {
        break;
      }
    }
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, wait_ms) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// The status and JSON body of a raw HTTP response.
Reply ParseRaw(const std::string& text) {
  Reply reply;
  if (text.rfind("HTTP/1.1 ", 0) == 0) reply.status = std::stoi(text.substr(9, 3));
  const size_t body = text.find("\r\n\r\n");
  if (body != std::string::npos) {
    reply.text = text.substr(body + 4);
    reply.body = json::parse(reply.text, nullptr, false);
  }
  return reply;
}

class HostileTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& flags = {}, const std::string& key = "") {
    signal(SIGPIPE, SIG_IGN);
    server_ = ServeProcess::Start(flags);
    ASSERT_NE(server_, nullptr);
    client_ = server_->Client(key);
    Reply reply = Post(*client_, "/v1/completions", kNormal);
    ASSERT_EQ(reply.status, 200) << reply.text;
    normal_text_ = reply.body["choices"][0]["text"];
  }
  // The server still answers a normal request, with the same text as at the start.
  void ExpectStillServing() {
    auto client = server_->Client();
    Reply reply = Post(*client, "/v1/completions", kNormal);
    ASSERT_EQ(reply.status, 200) << reply.text;
    EXPECT_EQ(reply.body["choices"][0]["text"], normal_text_);
  }
  void ExpectBadRequest(const std::string& path, const std::string& body,
                        const std::string& param = "") {
    SCOPED_TRACE(path + " " + body.substr(0, 120));
    ExpectError(Post(*client_, path, body), 400, param);
  }
  std::string Metrics() { return Get(*client_, "/metrics").text; }
  // Waits (bounded) until no request runs or waits and no block is referenced.
  bool EngineIdle() {
    for (int i = 0; i < 600; ++i) {
      const std::string text = Metrics();
      if (Metric(text, "kvserve:num_requests_running") == 0 &&
          Metric(text, "kvserve:num_requests_waiting") == 0 &&
          Metric(text, "kvserve:kv_cache_blocks{state=\"used\"}") == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // True once the engine has generated at least `tokens` tokens in all (a request sent on a raw
  // socket may not have reached the engine when EngineIdle first looks).
  bool GeneratedAtLeast(double tokens) {
    for (int i = 0; i < 600; ++i) {
      if (Metric(Metrics(), "kvserve:generation_tokens_total") >= tokens) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::unique_ptr<ServeProcess> server_;
  std::unique_ptr<httplib::Client> client_;
  std::string normal_text_;
};

TEST_F(HostileTest, MalformedTruncatedAndDeepJson) {
  Start();
  const std::string deep_arrays =
      "{\"prompt\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string deep_objects = "{\"prompt\":\"x\",\"user\":";
  for (int i = 0; i < 100000; ++i) deep_objects += "{\"a\":";
  deep_objects += "1" + std::string(100000, '}') + "}";
  for (const std::string& body :
       {std::string(),
        std::string("{"),
        std::string("{\"prompt\":"),
        std::string("{\"prompt\":\"Once upon"),
        std::string("{\"prompt\":\"x\",}"),
        std::string("{'prompt':'x'}"),
        std::string("[1,2]"),
        std::string("null"),
        std::string("\"x\""),
        std::string("{\"prompt\":\"x\"} trailing"),
        std::string("{\"prompt\":[1,2,"),
        std::string("{\"prompt\":\"\\u12\"}"),
        std::string("{\"prompt\":\"x\",\"max_tokens\":1e400}"),
        std::string("{\"prompt\":\"x\",\"temperature\":-1e999}"),
        std::string("{\"prompt\":\"x\",\"max_tokens\":" + std::string(5000, '9') + "}"),
        std::string("{\"prompt\":\"x\",\"max_tokens\":NaN}"),
        std::string(1, '\0'),
        deep_arrays,
        "{\"prompt\":[" + deep_arrays.substr(10),
        deep_objects}) {
    ExpectBadRequest("/v1/completions", body);
    ExpectBadRequest("/v1/chat/completions", body);
    ExpectBadRequest("/tokenize", body);
    ExpectBadRequest("/detokenize", body);
  }
  // Brackets inside strings do not count toward the depth limit.
  json in_string = kNormal;
  in_string["user"] = std::string(200, '[');
  EXPECT_EQ(Post(*client_, "/v1/completions", in_string).status, 200);
  // Exactly the depth limit parses (and is then refused for its type, not its depth).
  const std::string at_limit = std::string(63, '[') + std::string(63, ']');
  Reply reply = Post(*client_, "/v1/completions", "{\"prompt\":\"x\",\"user\":" + at_limit + "}");
  ExpectError(reply, 400, "user");
  ExpectStillServing();
}

TEST_F(HostileTest, WrongTypesForEveryField) {
  Start();
  const json wrong_values = {"seven", 7, 7.5, true, json::object({{"a", 1}}), json::array({1})};
  // Field -> the kinds of value it accepts ("int", "number", "string", "bool", "object", ...).
  const std::vector<std::pair<std::string, std::vector<std::string>>> fields = {
      {"model", {"string"}},
      {"prompt", {"string", "array"}},
      {"max_tokens", {"int"}},
      {"max_completion_tokens", {"int"}},
      {"temperature", {"int", "number"}},
      {"top_p", {"int", "number"}},
      {"min_p", {"int", "number"}},
      {"presence_penalty", {"int", "number"}},
      {"frequency_penalty", {"int", "number"}},
      {"repetition_penalty", {"int", "number"}},
      {"top_k", {"int"}},
      {"seed", {"int"}},
      {"logit_bias", {"object"}},
      {"n", {"int"}},
      {"stop", {"string", "array"}},
      {"logprobs", {"int"}},
      {"stream", {"bool"}},
      {"stream_options", {"object"}},
      {"ignore_eos", {"bool"}},
      {"user", {"string"}},
      {"session_id", {"string"}},
      {"cache_salt", {"string"}},
      {"best_of", {"int"}},
      {"echo", {"bool"}},
      {"suffix", {"string"}},
  };
  auto kind_of = [](const json& v) -> std::string {
    if (v.is_string()) return "string";
    if (v.is_number_integer()) return "int";
    if (v.is_number()) return "number";
    if (v.is_boolean()) return "bool";
    if (v.is_object()) return "object";
    return "array";
  };
  int refused = 0;
  for (const auto& [field, accepted] : fields) {
    for (const json& value : wrong_values) {
      if (std::find(accepted.begin(), accepted.end(), kind_of(value)) != accepted.end()) continue;
      json body = kNormal;
      body[field] = value;
      SCOPED_TRACE(body.dump());
      ExpectError(Post(*client_, "/v1/completions", body), 400, field == "prompt" ? "" : field);
      ++refused;
    }
  }
  EXPECT_GE(refused, 100);
  // Inside structured fields.
  for (const json& body :
       {json{{"prompt", "x"}, {"stream_options", {{"include_usage", 1}}}},
        json{{"prompt", "x"}, {"logit_bias", {{"5", "high"}}}},
        json{{"prompt", "x"}, {"logit_bias", {{"token", 1}}}},
        json{{"prompt", "x"}, {"logit_bias", {{"-1", 1}}}},
        json{{"prompt", "x"}, {"stop", {"a", 5}}}, json{{"prompt", {"a", 5}}},
        json{{"prompt", {{1, 2}, "a", 7}}}, json{{"prompt", json::array()}},
        json{{"prompt", {json::array()}}}, json{{"prompt", {1, "a"}}}, json{{"prompt", {1.5}}}}) {
    ExpectBadRequest("/v1/completions", body.dump());
  }
  // Chat messages.
  for (const json& messages :
       {json("hi"), json::array(), json{1}, json{{{"role", 5}, {"content", "x"}}},
        json{{{"role", "wizard"}, {"content", "x"}}}, json{{{"role", "user"}}},
        json{{{"content", "x"}}}, json{{{"role", "user"}, {"content", 5}}},
        json{{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}},
        json{{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 5}}}}}},
        json{{{"role", "user"}, {"content", {"just a string"}}}}}) {
    ExpectBadRequest("/v1/chat/completions", json{{"messages", messages}}.dump());
  }
  ExpectBadRequest(
      "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"logprobs", 3}}.dump(),
      "logprobs");
  // The other routes.
  for (const json& body : {json{{"content", 5}}, json{{"content", "x"}, {"add_special", "yes"}},
                           json{{"text", "x"}}}) {
    ExpectBadRequest("/tokenize", body.dump());
  }
  for (const json& body : {json{{"tokens", "1,2"}}, json{{"tokens", {1, "2"}}},
                           json{{"tokens", {-1}}}, json{{"tokens", {1.5}}}, json::object()}) {
    ExpectBadRequest("/detokenize", body.dump());
  }
  auto session = client_->Delete(("/v1/sessions/" + std::string(300, 's')).c_str());
  ASSERT_TRUE(session);
  EXPECT_EQ(session->status, 400);
  ExpectStillServing();
}

TEST_F(HostileTest, NumbersAtAndBeyondTheirLimits) {
  Start();
  const int n_ctx = Get(*client_, "/v1/models").body["data"][0]["max_model_len"];
  auto with = [](const std::string& field, const json& value) {
    json body = kNormal;
    body[field] = value;
    return body;
  };
  const std::string huge = "18446744073709551616";  // 2^64: a double to the parser
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, json>>{{"max_tokens", 0},
                                                 {"max_tokens", -1},
                                                 {"max_tokens", INT64_MIN},
                                                 {"max_tokens", UINT64_MAX},
                                                 {"max_tokens", 1e300},
                                                 {"max_tokens", (1 << 24) + 1},
                                                 {"max_tokens", n_ctx},
                                                 {"max_completion_tokens", 0},
                                                 {"n", 0},
                                                 {"n", -1},
                                                 {"n", kMaxChoices + 1},
                                                 {"n", UINT64_MAX},
                                                 {"logprobs", -1},
                                                 {"logprobs", kMaxTopLogprobs + 1},
                                                 {"temperature", -0.01},
                                                 {"temperature", 2.01},
                                                 {"temperature", 1e308},
                                                 {"top_p", 0},
                                                 {"top_p", 1.5},
                                                 {"min_p", -1},
                                                 {"top_k", -2},
                                                 {"top_k", 100000000},
                                                 {"presence_penalty", 3},
                                                 {"frequency_penalty", -3},
                                                 {"repetition_penalty", 0},
                                                 {"repetition_penalty", -1},
                                                 {"seed", UINT64_MAX},
                                                 {"best_of", 2}}) {
    SCOPED_TRACE(field + " = " + value.dump());
    ExpectError(Post(*client_, "/v1/completions", with(field, value)), 400, field);
  }
  ExpectBadRequest("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":" + huge + "}",
                   "max_tokens");
  // At the limits: accepted.
  const int n_prompt =
      Post(*client_, "/tokenize", json{{"content", "Once upon a time"}, {"add_special", true}})
          .body["tokens"]
          .size();
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, json>>{{"max_tokens", n_ctx - n_prompt},
                                                 {"max_tokens", 1},
                                                 {"n", kMaxChoices},
                                                 {"logprobs", kMaxTopLogprobs},
                                                 {"logprobs", 0},
                                                 {"temperature", 2},
                                                 {"top_k", -1},
                                                 {"seed", INT64_MIN},
                                                 {"seed", -1}}) {
    SCOPED_TRACE(field + " = " + value.dump());
    json body = with(field, value);
    if (field == "n") body["max_tokens"] = 1;
    Reply reply = Post(*client_, "/v1/completions", body);
    EXPECT_EQ(reply.status, 200) << reply.text;
  }
  json chat = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"logprobs", true}, {"max_tokens", 2}};
  chat["top_logprobs"] = kMaxTopLogprobs;
  EXPECT_EQ(Post(*client_, "/v1/chat/completions", chat).status, 200);
  chat["top_logprobs"] = kMaxTopLogprobs + 1;
  ExpectError(Post(*client_, "/v1/chat/completions", chat), 400, "top_logprobs");
  // Many prompts times many choices stays within the limits.
  json many = {{"prompt", std::vector<std::string>(kMaxPrompts + 1, "a")}, {"max_tokens", 1}};
  ExpectError(Post(*client_, "/v1/completions", many), 400, "prompt");
  ExpectStillServing();
}

TEST_F(HostileTest, StopListsHugeStringsInvalidUtf8AndTokenIds) {
  Start();
  json body = kNormal;
  body["stop"] = std::vector<std::string>(5000, "x");
  ExpectError(Post(*client_, "/v1/completions", body), 400, "stop");
  body["stop"] = std::string(100000, 'x');
  ExpectError(Post(*client_, "/v1/completions", body), 400, "stop");
  body["stop"] = json::array({""});
  ExpectError(Post(*client_, "/v1/completions", body), 400, "stop");
  body["stop"] = std::vector<std::string>(kMaxStopStrings, std::string(1024, 'q'));
  EXPECT_EQ(Post(*client_, "/v1/completions", body).status, 200);
  for (const char* field : {"user", "session_id", "cache_salt", "model"}) {
    json long_id = kNormal;
    long_id[field] = std::string(kMaxIdBytes + 1, 'u');
    ExpectError(Post(*client_, "/v1/completions", long_id), 400, field);
  }
  // A prompt of 1 MiB of text: tokenized, then refused for the context (not a crash or a 500).
  json long_prompt = {{"prompt", std::string(1 << 20, 'a')}, {"max_tokens", 1}};
  ExpectError(Post(*client_, "/v1/completions", long_prompt), 400, "prompt");

  // Invalid UTF-8 never reaches the tokenizer: the JSON parser refuses it.
  for (const std::string& text :
       {std::string("\xff\xfe"), std::string("\xc0\x80"), std::string("abc\xe2\x82"),
        std::string("\xed\xa0\x80"), std::string("\x80")}) {
    ExpectBadRequest("/v1/completions", "{\"prompt\":\"" + text + "\",\"max_tokens\":2}");
    ExpectBadRequest("/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}]}");
  }
  ExpectBadRequest("/v1/completions", R"({"prompt":"\ud800 lone surrogate","max_tokens":2})");
  // Token ids whose pieces are partial UTF-8 (byte tokens) give valid JSON back.
  Reply partial = Post(*client_, "/detokenize", json{{"tokens", {3 + 0xe2, 3 + 0x82}}});
  EXPECT_EQ(partial.status, 200) << partial.text;
  EXPECT_TRUE(partial.body.is_object()) << partial.text;
  Reply from_bytes =
      Post(*client_, "/v1/completions",
           json{{"prompt", {1, 3 + 0xe2, 3 + 0x82}}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(from_bytes.status, 200) << from_bytes.text;
  EXPECT_TRUE(from_bytes.body.is_object()) << from_bytes.text;

  // Token ids out of range, in every prompt shape.
  const int n_vocab = 512;  // stories260K
  for (const json& prompt :
       {json{-1}, json{n_vocab}, json{1, 2, INT32_MAX}, json{1, int64_t{1} << 40}, json{UINT64_MAX},
        json{INT64_MIN}, json{{1, 2}, {1, n_vocab + 5}}}) {
    SCOPED_TRACE(prompt.dump());
    ExpectError(Post(*client_, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 1}}), 400,
                "prompt");
  }
  json bias = kNormal;
  bias["logit_bias"] = {{std::to_string(n_vocab), 1}};
  ExpectError(Post(*client_, "/v1/completions", bias), 400, "logit_bias");
  bias["logit_bias"] = {{"99999999999", 1}};
  ExpectError(Post(*client_, "/v1/completions", bias), 400, "logit_bias");
  bias["logit_bias"] = {{"5", 101}};
  ExpectError(Post(*client_, "/v1/completions", bias), 400, "logit_bias");
  ExpectStillServing();
}

TEST_F(HostileTest, OversizedHeadsAndBodies) {
  Start({"--max-body", "64KiB"});
  auto raw = [&](const std::string& request) {
    const int fd = ConnectTo(server_->port());
    SendAll(fd, request);
    const std::string reply = ReadResponse(fd, 10000);
    close(fd);
    return reply;
  };
  // 10,000 header lines, and one header of 40 KiB: 431, then the connection is closed.
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  for (const std::string& request :
       {many + "\r\n",
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40 * 1024, 'a') + "\r\n\r\n",
        "GET /health HTTP/1.1\r\n" + std::string(40 * 1024, 'b')}) {
    const Reply reply = ParseRaw(raw(request));
    ExpectError(reply, 431);
  }
  // A request line beyond httplib's 8 KiB: 414 from httplib.
  EXPECT_EQ(ParseRaw(raw("GET /" + std::string(9000, 'p') + " HTTP/1.1\r\nHost: x\r\n\r\n")).status,
            414);
  // Bodies: over --max-body by Content-Length (413 before reading it), chunked (413 while
  // reading), a Content-Length that is not a number (400).
  auto client = server_->Client();
  ExpectError(Post(*client, "/v1/completions", std::string(100 * 1024, ' ')), 413);
  const std::string chunk = "4000\r\n" + std::string(0x4000, ' ') + "\r\n";
  std::string chunked =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
      "Content-Type: application/json\r\n\r\n";
  for (int i = 0; i < 8; ++i) chunked += chunk;  // 128 KiB, no final chunk
  ExpectError(ParseRaw(raw(chunked)), 413);
  EXPECT_EQ(ParseRaw(raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n"))
                    .status /
                100,
            4);
  // Garbage instead of HTTP.
  EXPECT_EQ(ParseRaw(raw("\x16\x03\x01\x02\x01\x01\xfc\x03\x03 not http\r\n\r\n")).status, 400);
  ExpectStillServing();
}

TEST_F(HostileTest, SlowClientsAreCutOffWhileOthersAreServed) {
  Start({"--read-timeout", "1", "--http-threads", "4"});
  // Eight slowloris clients (twice the threads): a head, then a body, one byte every 100 ms.
  const std::string body_head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000\r\n\r\n{\"prompt\":\"";
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(ConnectTo(server_->port()));
    if (i % 2 == 1) SendAll(slow.back(), body_head.substr(0, body_head.size() - 4));
  }
  std::vector<std::string> replies(slow.size());
  std::vector<bool> closed(slow.size(), false);
  // Meanwhile normal requests are answered (they would wait for a thread if slow clients held
  // them).
  std::thread normal([&] {
    for (int i = 0; i < 5; ++i) ExpectStillServing();
  });
  for (int step = 0; step < 200; ++step) {  // 20 s at most; the cut comes after ~1 s
    bool all = true;
    for (size_t i = 0; i < slow.size(); ++i) {
      if (closed[i]) continue;
      all = false;
      send(slow[i], "a", 1, MSG_NOSIGNAL);
      char buffer[4096];
      const ssize_t n = recv(slow[i], buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) replies[i].append(buffer, static_cast<size_t>(n));
      if (n == 0) closed[i] = true;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  normal.join();
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_TRUE(closed[i]) << "slow client " << i << " was never cut off";
    ExpectError(ParseRaw(replies[i]), 408);
    close(slow[i]);
  }
  ExpectStillServing();
}

TEST_F(HostileTest, ManyConnectionsBeyondTheThreadLimit) {
  Start({"--http-threads", "4", "--max-connections", "64"});
  // 60 connections that say nothing (15x the threads): a normal request is still answered.
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) idle.push_back(ConnectTo(server_->port()));
  ExpectStillServing();
  // Beyond --max-connections a new connection is answered 503 and closed.
  std::vector<int> extra;
  for (int i = 0; i < 20; ++i) extra.push_back(ConnectTo(server_->port()));
  int refused = 0;
  for (int fd : extra) {
    const Reply reply = ParseRaw(ReadUntilClosed(fd, 500));
    if (reply.status == 503) {
      ExpectError(reply, 503);
      ++refused;
    }
    close(fd);
  }
  EXPECT_GE(refused, 15) << "60 idle + 20 new on a limit of 64 (the test's client is one more)";
  for (int fd : idle) close(fd);
  // Once they are gone, new connections are served again (bounded retries while they close).
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    auto client = server_->Client();
    served = Post(*client, "/v1/completions", kNormal).status == 200;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(served);
  ExpectStillServing();
}

// A streamed request whose client never reads: big enough (16 choices with 20 alternatives each)
// to fill the socket buffers, so the server's writes stall.
int OpenUnreadStream(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"n", 16}, {"logprobs", 20},
           {"ignore_eos", true},           {"stream", true}}
          .dump();
  SendAll(fd,
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  return fd;
}

TEST_F(HostileTest, ClientsThatNeverReadTheirStream) {
  Start({"--write-timeout", "1", "--http-threads", "4"});
  // As many unread streams as threads: each stalls its thread in a write (the answer is over a
  // megabyte; the socket buffers hold 256 KiB), so the normal request below is answered only
  // once --write-timeout cuts a stalled writer off.
  std::vector<int> unread;
  for (int i = 0; i < 4; ++i) unread.push_back(OpenUnreadStream(server_->port()));
  ExpectStillServing();
  // Their requests end, no block stays referenced, and the threads are free again.
  EXPECT_TRUE(EngineIdle()) << Metrics();
  for (int i = 0; i < 4; ++i) ExpectStillServing();
  for (int fd : unread) close(fd);
}

TEST_F(HostileTest, RequestsAfterShutdownStartsGet503) {
  Start({"--write-timeout", "6", "--shutdown-timeout", "30"});
  // A stream that is never read holds the server in its drain (it waits up to 5 s for streams
  // being written), which leaves a window in which the listener is open but draining.
  const int unread = OpenUnreadStream(server_->port());
  // 16 choices of 100 tokens. EngineIdle alone passed before the request had reached the engine,
  // and then nothing held the drain (a CI run under ASan: the listener was gone at the POST).
  EXPECT_TRUE(GeneratedAtLeast(16 * 100)) << Metrics();
  EXPECT_TRUE(EngineIdle()) << "the unread stream's tokens are all generated";
  std::thread terminate([&] { EXPECT_EQ(server_->Terminate(), 0) << server_->log(); });
  bool draining = false;
  for (int i = 0; i < 200 && !draining; ++i) {
    const json health = Get(*client_, "/health").body;
    draining = health.is_object() && health.value("status", "") == "draining";
    if (!draining) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(draining) << server_->log();
  if (draining) {
    // Not ready (the load balancer takes it out), but alive: a liveness probe must not restart a
    // replica that is finishing its streams.
    Reply ready = Get(*client_, "/readyz");
    EXPECT_EQ(ready.status, 503);
    EXPECT_EQ(ready.body["status"], "draining") << ready.text;
    Reply live = Get(*client_, "/livez");
    EXPECT_EQ(live.status, 200) << live.text;
    EXPECT_EQ(live.body["state"], "draining") << live.text;
    Reply reply = Post(*client_, "/v1/completions", kNormal);
    ExpectError(reply, 503);
    EXPECT_FALSE(reply.retry_after.empty());
    ExpectError(Post(*client_, "/v1/chat/completions",
                     json{{"messages", {{{"role", "user"}, {"content", "x"}}}}}),
                503);
  }
  terminate.join();
  close(unread);
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

TEST_F(HostileTest, PerKeyConcurrencyGets429WithRetryAfter) {
  const std::string key_file = TempDir() + "/hostile-keys.txt";
  std::ofstream(key_file) << "key-alpha-0123\nkey-beta-4567\n";
  Start({"--api-key-file", key_file, "--max-concurrent-per-key", "1", "--write-timeout", "30"},
        "key-beta-4567");
  auto alpha = server_->Client("key-alpha-0123");
  auto beta = server_->Client("key-beta-4567");
  Reply first = Post(*alpha, "/v1/completions", kNormal);
  ASSERT_EQ(first.status, 200) << first.text;
  // Alpha's only place is held by a stream it never reads (its writer stalls; --write-timeout is
  // long), so alpha's next request is refused while beta's is served.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server_->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"n", 16}, {"logprobs", 20},
           {"ignore_eos", true},           {"stream", true}}
          .dump();
  SendAll(fd,
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha-0123\r\n"
          "Content-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  // The stream's status line means it holds the place (the lease is taken before the answer
  // starts). Retrying a request until it was refused raced the stream for the one place: when the
  // retry reached the server first, the stream itself was refused and every retry then succeeded
  // (CI under ASan, 2026-12-04).
  ASSERT_EQ(ReadFirstLine(fd, 20000), "HTTP/1.1 200 OK");
  const Reply refused = Post(*alpha, "/v1/completions", kNormal);
  ExpectError(refused, 429);
  EXPECT_EQ(refused.body["error"]["code"], "too_many_concurrent_requests") << refused.text;
  EXPECT_EQ(refused.retry_after, "1");
  ExpectError(Post(*alpha, "/v1/chat/completions",
                   json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 2}}),
              429);
  Reply other = Post(*beta, "/v1/completions", kNormal);
  EXPECT_EQ(other.status, 200) << other.text;
  EXPECT_EQ(other.body["choices"][0]["text"], first.body["choices"][0]["text"]);
  // The client leaves: the stream ends, the place is free again (bounded retries).
  close(fd);
  Reply again;
  for (int i = 0; i < 300 && again.status != 200; ++i) {
    again = Post(*alpha, "/v1/completions", kNormal);
    if (again.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(again.status, 200) << again.text;
  // Keys never reach the log, right or wrong.
  auto wrong = server_->Client("key-gamma-89ab");
  ExpectError(Post(*wrong, "/v1/completions", kNormal), 401);
  EXPECT_EQ(server_->Terminate(), 0);
  const std::string log = server_->log();
  for (const char* key : {"key-alpha-0123", "key-beta-4567", "key-gamma-89ab"}) {
    EXPECT_EQ(log.find(key), std::string::npos) << log;
  }
}

TEST_F(HostileTest, MaxPromptTokens) {
  Start({"--max-prompt-tokens", "8"});
  ExpectError(Post(*client_, "/v1/completions",
                   json{{"prompt", "Once upon a time there was a little girl named Lily who"},
                        {"max_tokens", 1}}),
              400, "prompt");
  ExpectError(Post(*client_, "/v1/completions", json{{"prompt", {1, 2, 3, 4, 5, 6, 7, 8, 9}}}), 400,
              "prompt");
  EXPECT_EQ(Post(*client_, "/v1/completions", json{{"prompt", {1, 2, 3, 4, 5, 6, 7, 8}}}).status,
            200);
  ExpectError(Post(*client_, "/v1/chat/completions",
                   json{{"messages",
                         {{{"role", "user"}, {"content", "Once upon a time there was a girl"}}}}}),
              400, "messages");
  ExpectStillServing();
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

TEST_F(HostileTest, HttpsWithASelfSignedCertificate) {
  const std::string cert = TempDir() + "/hostile-cert.pem";
  const std::string key = TempDir() + "/hostile-key.pem";
  const std::string make =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(make.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a certificate";
  signal(SIGPIPE, SIG_IGN);
  server_ = ServeProcess::Start({"--ssl-cert", cert, "--ssl-key", key, "--read-timeout", "1"});
  ASSERT_NE(server_, nullptr);
  EXPECT_NE(server_->log().find("https://127.0.0.1:"), std::string::npos) << server_->log();
  // A verifying client (the certificate is its CA) gets the same answers as over plain HTTP.
  httplib::Client tls("https://127.0.0.1:" + std::to_string(server_->port()));
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(true);
  tls.set_read_timeout(60, 0);
  Reply first = Post(tls, "/v1/completions", kNormal);
  ASSERT_EQ(first.status, 200) << first.text;
  json streamed = kNormal;
  streamed["stream"] = true;
  auto stream = tls.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(stream);
  EXPECT_EQ(StreamText(ParseSse(stream->body), 0), first.body["choices"][0]["text"]);
  ExpectError(Post(tls, "/v1/completions", std::string("{\"prompt\":")), 400);
  // Plain HTTP on the HTTPS port is closed unanswered; a handshake that stalls is cut off.
  {
    const int fd = ConnectTo(server_->port());
    SendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(ReadUntilClosed(fd, 20000).find("HTTP/1.1 200"), std::string::npos);
    close(fd);
  }
  {
    const int fd = ConnectTo(server_->port());
    SendAll(fd, std::string("\x16\x03\x01", 3));  // the start of a ClientHello, then nothing
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    ASSERT_EQ(poll(&p, 1, 20000), 1) << "the stalled handshake was never cut off";
    char byte;
    EXPECT_LE(recv(fd, &byte, 1, 0), 0);
    close(fd);
  }
  // Many requests on one kept-alive TLS connection, and the server still serves after all this.
  for (int i = 0; i < 5; ++i) {
    Reply again = Post(tls, "/v1/completions", kNormal);
    EXPECT_EQ(again.status, 200) << again.text;
    EXPECT_EQ(again.body["choices"][0]["text"], first.body["choices"][0]["text"]);
  }
  EXPECT_EQ(server_->Terminate(), 0) << server_->log();
}

TEST(ServeTlsFlagsTest, CertificateProblemsExitWithAMessage) {
  const std::string missing = TempDir() + "/no-such-cert.pem";
  for (std::vector<std::string> flags : {std::vector<std::string>{"--ssl-cert", missing},
                                         {"--ssl-cert", missing, "--ssl-key", missing}}) {
    std::string command = KvserveBinary() + " serve --port 0 -m " + ModelPath("stories260K.gguf");
    for (const std::string& flag : flags) command += " " + flag;
    command += " 2>" + TempDir() + "/tls.err";
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << command;
    EXPECT_NE(ReadAll(TempDir() + "/tls.err").find("ssl"), std::string::npos)
        << ReadAll(TempDir() + "/tls.err");
  }
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

TEST_F(HostileTest, TimeoutCutsARequestThatRunsLonger) {
  // --timeout (another name of --request-timeout) of a microsecond: past it before the second
  // step, so a request for 100 tokens ends early with finish_reason "length".
  signal(SIGPIPE, SIG_IGN);
  server_ = ServeProcess::Start({"--timeout", "0.000001"});
  ASSERT_NE(server_, nullptr);
  client_ = server_->Client();
  Reply reply =
      Post(*client_, "/v1/completions",
           json{{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"ignore_eos", true}});
  ASSERT_EQ(reply.status, 200) << reply.text;
  EXPECT_EQ(reply.body["choices"][0]["finish_reason"], "length");
  EXPECT_LT(reply.body["usage"]["completion_tokens"].get<int>(), 100) << reply.text;
  EXPECT_TRUE(EngineIdle()) << Metrics();
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

// What the server answers to `request` on a new connection: everything it sends, and whether it
// then closed the connection (rather than going quiet for `wait_ms`).
struct Exchange {
  std::string text;
  bool closed = false;
};
Exchange SendOnNewConnection(int port, const std::string& request, int wait_ms) {
  const int fd = ConnectTo(port);
  SendAll(fd, request);
  Exchange exchange;
  char buffer[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, wait_ms) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      exchange.closed = true;
      break;
    }
    exchange.text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return exchange;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Issue 33: requests whose end could be read two ways (RFC 9112), each followed by a second
// request that a parser disagreeing on the first one's end would answer ("smuggled"). Each gets
// one answer, its status with an OpenAI-style body and "Connection: close", and the connection is
// closed; the smuggled request is never answered (no 404 anywhere), and a normal request on a new
// connection is served as before.
TEST_F(HostileTest, AmbiguousFramingGets400AndTheConnectionClosed) {
  Start();
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  const std::string body = kNormal.dump();
  const std::string length = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  const std::string chunked = "Transfer-Encoding: chunked\r\n";
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      // Content-Length: two different values, a list of them.
      {post + length + "Content-Length: 2\r\n\r\n" + body, 400},
      {post + "Content-Length: 2, " + std::to_string(body.size()) + "\r\n\r\n" + body, 400},
      // Transfer-Encoding with Content-Length, and other than exactly chunked.
      {post + length + chunked + "\r\n0\r\n\r\n" + body, 400},
      {post + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
      {post + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400},
      {post + chunked + chunked + "\r\n0\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
      // Invalid chunk sizes, data without its CRLF, extension abuse, trailers (read by a worker).
      {post + chunked + "\r\nzz\r\n" + body, 400},
      {post + chunked + "\r\n-1\r\n" + body, 400},
      {post + chunked + "\r\n0x10\r\n" + body, 400},
      {post + chunked + "\r\n10000000000000001\r\n" + body, 400},
      {post + chunked + "\r\n5 \r\nhello\r\n0\r\n\r\n", 400},
      {post + chunked + "\r\n2\r\n{}XX0\r\n\r\n", 400},
      {post + chunked + "\r\n2;x=" + std::string(8000, 'e') + "\r\n{}\r\n0\r\n\r\n", 400},
      {post + chunked + "\r\n2\r\n{}\r\n0\r\nX-Trailer: t\r\n\r\n", 400},
      // Obsolete line folding, whitespace before the colon, bare CR or LF, two Hosts, no length.
      {post + "X-A: b\r\n " + length + "\r\n" + body, 400},
      {post + "Content-Length : " + std::to_string(body.size()) + "\r\n\r\n" + body, 400},
      {"POST /v1/completions HTTP/1.1\r\nHost: x\n" + length + "\r\n" + body, 400},
      {"POST /v1/completions HTTP/1.1\nHost: x\n" + length + "\n" + body, 400},
      {post + "X-A: b\rContent-Length: 2\r\n" + length + "\r\n" + body, 400},
      {post + "Host: y\r\n" + length + "\r\n" + body, 400},
      {post + "\r\n" + body, 411},
      // A request line over the limit (answered as soon as 8 KiB of it arrived).
      {"GET /" + std::string(9000, 'p') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
  };
  for (const auto& [request, status] : cases) {
    SCOPED_TRACE(request.substr(0, 160));
    const Exchange exchange = SendOnNewConnection(server_->port(), request + smuggled, 10000);
    EXPECT_TRUE(exchange.closed) << exchange.text;
    EXPECT_EQ(Count(exchange.text, "HTTP/1.1 "), 1u) << exchange.text;
    EXPECT_NE(exchange.text.find("\r\nConnection: close\r\n"), std::string::npos) << exchange.text;
    ExpectError(ParseRaw(exchange.text), status);
    ExpectStillServing();
  }
  EXPECT_LE(Metric(Metrics(), "kvserve:http_responses_total{code=\"404\"}"), 0)
      << "a smuggled request was answered";
  // The same two requests well framed, on one connection: both answered, the second one 404.
  const Exchange both = SendOnNewConnection(
      server_->port(), post + length + "Connection: keep-alive\r\n\r\n" + body + smuggled, 2000);
  EXPECT_EQ(Count(both.text, "HTTP/1.1 "), 2u) << both.text;
  EXPECT_NE(both.text.find("HTTP/1.1 404"), std::string::npos) << both.text;
}

}  // namespace
}  // namespace kvserve
