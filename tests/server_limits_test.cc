// `kvserve serve` guarding itself: API keys, the queue limit (429), graceful shutdown on SIGTERM,
// bad flags, and the HTTP front's own limits (loading, slow clients, huge headers, endless
// bodies), the last in-process without a model.
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

TEST(ServerAuthTest, KeysGuardEverythingButHealthAndMetrics) {
  signal(SIGPIPE, SIG_IGN);
  const std::string key_file = TempDir() + "/api-keys.txt";
  std::ofstream(key_file) << "# two tenants\nkey-alpha\nkey-beta\n";
  auto server = ServeProcess::Start({"--api-key-file", key_file});
  ASSERT_NE(server, nullptr);
  auto anonymous = server->Client();
  auto alpha = server->Client("key-alpha");
  auto beta = server->Client("key-beta");
  auto wrong = server->Client("key-gamma");
  const json request = {{"prompt",
                         "Once upon a time, Tom and his mom went to the big store to "
                         "buy some red apples and a toy."},
                        {"max_tokens", 2},
                        {"temperature", 0}};
  ExpectError(Post(*anonymous, "/v1/completions", request), 401);
  ExpectError(Post(*wrong, "/v1/completions", request), 401);
  ExpectError(Get(*wrong, "/v1/models"), 401);
  ExpectError(Post(*anonymous, "/tokenize", json{{"content", "x"}}), 401);
  auto session = anonymous->Delete("/v1/sessions/x");
  ASSERT_TRUE(session);
  EXPECT_EQ(session->status, 401);
  EXPECT_EQ(Get(*anonymous, "/health").status, 200);
  EXPECT_EQ(Get(*anonymous, "/metrics").status, 200);
  EXPECT_EQ(Get(*alpha, "/v1/models").status, 200);

  // Prefix-cache hits never cross keys.
  auto cached = [&](httplib::Client& client) {
    Reply reply = Post(client, "/v1/completions", request);
    EXPECT_EQ(reply.status, 200) << reply.text;
    return reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached(*alpha), 0);
  EXPECT_GT(cached(*alpha), 0);
  EXPECT_EQ(cached(*beta), 0);
  // Nor do sessions: beta cannot release alpha's.
  json with_session = request;
  with_session["session_id"] = "alpha-conv";
  EXPECT_EQ(Post(*alpha, "/v1/completions", with_session).status, 200);
  auto foreign = beta->Delete("/v1/sessions/alpha-conv");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 404);
  auto own = alpha->Delete("/v1/sessions/alpha-conv");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerAuthTest, MetricsAuth) {
  auto server = ServeProcess::Start({"--api-key", "sekret", "--metrics-auth"});
  ASSERT_NE(server, nullptr);
  ExpectError(Get(*server->Client(), "/metrics"), 401);
  EXPECT_EQ(Get(*server->Client("sekret"), "/metrics").status, 200);
  EXPECT_EQ(Get(*server->Client(), "/health").status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerQueueTest, FullQueueGets429WithRetryAfter) {
  auto server = ServeProcess::Start({"--max-num-seqs", "1", "--max-queue", "1"});
  ASSERT_NE(server, nullptr);
  const json request = {{"prompt", "Once upon a time"},
                        {"max_tokens", 100},
                        {"ignore_eos", true},
                        {"temperature", 0}};
  constexpr int kClients = 12;
  std::vector<Reply> replies(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = server->Client();
      replies[i] = Post(*client, "/v1/completions", request);
    });
  }
  for (std::thread& thread : threads) thread.join();
  int ok = 0, busy = 0;
  for (const Reply& reply : replies) {
    if (reply.status == 200) {
      ++ok;
    } else {
      ExpectError(reply, 429);
      EXPECT_FALSE(reply.retry_after.empty());
      ++busy;
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1) << "12 simultaneous requests all fit in 1 running + 1 waiting";
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerShutdownTest, SigtermFinishesInFlightThenExitsZero) {
  auto server = ServeProcess::Start({"--shutdown-timeout", "30"});
  ASSERT_NE(server, nullptr);
  const json request = {{"prompt", "Once upon a time"},
                        {"max_tokens", 110},
                        {"ignore_eos", true},
                        {"temperature", 0},
                        {"stream", true}};
  std::string streamed;
  int status = 0;
  bool started = false;
  std::mutex mutex;
  std::thread client_thread([&] {
    auto client = server->Client();
    httplib::Request http;
    http.method = "POST";
    http.path = "/v1/completions";
    http.body = request.dump();
    http.set_header("Content-Type", "application/json");
    http.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      std::lock_guard lock(mutex);
      streamed.append(data, n);
      started = true;
      return true;
    };
    auto result = client->send(http);
    if (result) status = result->status;
  });
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mutex);
      if (started) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int exit_code = server->Terminate();
  client_thread.join();
  EXPECT_EQ(exit_code, 0) << server->log();
  EXPECT_EQ(status, 200);
  SseStream stream = ParseSse(streamed);
  EXPECT_TRUE(stream.done) << "the in-flight stream was cut: " << streamed.size() << " bytes";
  std::string finish;
  StreamText(stream, 0, &finish);
  EXPECT_EQ(finish, "length");
  EXPECT_NE(server->log().find("SIGTERM: draining"), std::string::npos) << server->log();
}

TEST(ServerCliTest, BadFlagsExitTwoWithAMessage) {
  for (std::vector<std::string> flags : {std::vector<std::string>{"--kv-memory", "2XB"},
                                         {"--port", "70000"},
                                         {"--api-key", "a", "--api-key-file", "f"},
                                         {"--max-body", "-1"},
                                         {"--replica-name", "'a b'"},
                                         {"--replica-name", "''"},
                                         {"--write-timeout", "0"},
                                         {"--max-prompt-tokens", "-1"},
                                         {"--max-concurrent-per-key", "x"}}) {
    std::string command = KvserveBinary() + " serve -m " + ModelPath("stories260K.gguf");
    for (const std::string& flag : flags) command += " " + flag;
    command += " 2>" + TempDir() + "/cli.err";
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << command;
    const std::string message = ReadAll(TempDir() + "/cli.err");
    EXPECT_NE(message.find("kvserve serve: "), std::string::npos) << message;
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
  }
}

// The HTTP front alone, in-process and without a model.
class FrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    HttpServerOptions options;
    options.port = 0;
    options.max_body_bytes = 16 * 1024;
    options.read_timeout_s = 1;
    options.threads = 4;
    server_ = std::make_unique<HttpServer>(options);
    ASSERT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    for (int i = 0; i < 500 && !client_->Get("/health"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void TearDown() override {
    server_->Stop();
    thread_.join();
  }
  int Connect() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server_->port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(FrontTest, LoadingAnswers503) {
  Reply health = Get(*client_, "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body["status"], "loading");
  EXPECT_EQ(Get(*client_, "/readyz").status, 503);
  Reply live = Get(*client_, "/livez");
  EXPECT_EQ(live.status, 200);  // loading is alive: a restart would only load again
  EXPECT_EQ(live.body["state"], "loading");
  Reply completion = Post(*client_, "/v1/completions", json{{"prompt", "x"}});
  ExpectError(completion, 503);
  server_->BeginDrain();
  EXPECT_EQ(Get(*client_, "/health").body["status"], "draining");
  EXPECT_EQ(Get(*client_, "/readyz").body["status"], "draining");
  EXPECT_EQ(Get(*client_, "/livez").status, 200);
  EXPECT_EQ(Get(*client_, "/metrics").status, 200);
}

TEST_F(FrontTest, SlowClientsDoNotBlockOthers) {
  // Four connections (the whole pool) that send half a request line and stall.
  std::vector<int> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(Connect());
    send(stalled.back(), "POST /v1/comp", 13, 0);
  }
  // The read timeout cuts them off; a well-behaved client gets through (bounded retries).
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(2, 0);
    auto result = client.Get("/health");
    served = result && result->status == 503;  // loading: no model in this test
  }
  EXPECT_TRUE(served);
  for (int fd : stalled) close(fd);
}

// The route table decides which routes read a chunked body (within --max-body) and which refuse
// it unread: a body route reads it and then answers (503: no model in this test), any other
// method and path, known or not, is 400 before a byte of the body is read.
TEST_F(FrontTest, ChunkedBodiesOnlyForTheRoutesThatReadABody) {
  auto send_chunked = [&](const std::string& method, const std::string& path) {
    const int fd = Connect();
    const std::string request = method + " " + path +
                                " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                "Content-Type: application/json\r\nConnection: close\r\n\r\n"
                                "2\r\n{}\r\n0\r\n\r\n";
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string reply;
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
      reply.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
    return reply;
  };
  for (const char* path :
       {"/tokenize", "/detokenize", "/apply-template", "/v1/completions", "/v1/chat/completions"}) {
    const std::string reply = send_chunked("POST", path);
    EXPECT_EQ(reply.rfind("HTTP/1.1 503 ", 0), 0u) << path << ": " << reply.substr(0, 200);
  }
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"POST", "/health"},
                                                        {"GET", "/v1/models"},
                                                        {"DELETE", "/v1/sessions/abc"},
                                                        {"PUT", "/tokenize"},
                                                        {"POST", "/no/such/route"}}) {
    const std::string reply = send_chunked(method, path);
    EXPECT_EQ(reply.rfind("HTTP/1.1 400 ", 0), 0u) << method << " " << path << ": " << reply;
    EXPECT_NE(reply.find("a chunked request body is accepted only by the POST API routes, not by " +
                         method + " " + path),
              std::string::npos)
        << reply;
  }
}

TEST_F(FrontTest, HugeHeadersAndEndlessBodiesAreCutOff) {
  // A header line beyond httplib's limit: the request is refused, and the server goes on.
  {
    const int fd = Connect();
    const std::string request =
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n";
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buffer[1024];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    const std::string reply = n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
    EXPECT_TRUE(reply.empty() || reply.find(" 200 ") == std::string::npos) << reply;
    close(fd);
  }
  // A chunked body that never ends: 413 once past --max-body, without reading it all.
  {
    const int fd = Connect();
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
        "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n";
    send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    const std::string chunk = "1000\r\n" + std::string(4096, 'a') + "\r\n";
    for (int i = 0; i < 64; ++i) {  // up to 256 KiB, 16x the limit
      if (send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) break;
    }
    std::string reply;
    char buffer[4096];
    for (int i = 0; i < 100; ++i) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      reply.append(buffer, static_cast<size_t>(n));
      if (reply.find("\r\n\r\n") != std::string::npos) break;
    }
    EXPECT_NE(reply.find(" 413 "), std::string::npos) << reply.substr(0, 200);
    close(fd);
  }
  // With Content-Length above the limit: 413 before the body is read.
  {
    auto result = client_->Post("/v1/completions", std::string(32 * 1024, 'a'), "application/json");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 413);
    EXPECT_TRUE(json::parse(result->body, nullptr, false).contains("error")) << result->body;
  }
  EXPECT_EQ(Get(*client_, "/health").status, 503);  // still serving
}

}  // namespace
}  // namespace kvserve
