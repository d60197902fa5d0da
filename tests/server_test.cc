// `kvserve serve` end to end on loopback: the real binary with stories260K.gguf on a free port,
// talked to over HTTP. Every endpoint, streaming and not, every error status, auth, sessions and
// cache isolation, client disconnects, graceful shutdown, and concurrent == sequential answers.
// The HTTP front's own limits (loading, slow clients, huge headers, endless bodies) are tested
// in-process without a model.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "support/paths.h"

namespace kvserve {
namespace {

using ::kvserve::testing::KvserveBinary;
using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TempDir;
using nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A `kvserve serve` child process on a free port; killed if the test did not stop it.
class ServeProcess {
 public:
  static std::unique_ptr<ServeProcess> Start(const std::vector<std::string>& extra) {
    static int counter = 0;
    auto process = std::unique_ptr<ServeProcess>(new ServeProcess);
    process->log_path_ = TempDir() + "/serve-" + std::to_string(counter++) + ".log";
    std::vector<std::string> args = {KvserveBinary(),
                                     "serve",
                                     "-m",
                                     ModelPath("stories260K.gguf"),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     "0",
                                     "-t",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    process->pid_ = fork();
    if (process->pid_ == 0) {
      const int fd = open(process->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Wait (bounded) for "ready"; the port is on the "listening" line.
    for (int i = 0; i < 1500; ++i) {
      const std::string log = ReadAll(process->log_path_);
      if (log.find("ready:") != std::string::npos) {
        const size_t at = log.find("127.0.0.1:");
        process->port_ = std::stoi(log.substr(at + 10));
        return process;
      }
      int status = 0;
      if (waitpid(process->pid_, &status, WNOHANG) == process->pid_) {
        process->pid_ = -1;
        ADD_FAILURE() << "kvserve serve exited early:\n" << log;
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "kvserve serve did not get ready:\n" << ReadAll(process->log_path_);
    return nullptr;
  }

  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // SIGTERM, then the exit status (bounded wait; -1 if it did not exit).
  int Terminate() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 3000; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  std::unique_ptr<httplib::Client> Client(const std::string& key = "") const {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client->set_read_timeout(60, 0);
    if (!key.empty()) client->set_bearer_token_auth(key);
    return client;
  }
  int port() const { return port_; }
  std::string log() const { return ReadAll(log_path_); }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string log_path_;
};

struct Reply {
  int status = 0;
  json body;
  std::string text;
  std::string retry_after;
};

Reply Post(httplib::Client& client, const std::string& path, const std::string& body,
           const httplib::Headers& headers = {}) {
  auto result = client.Post(path.c_str(), headers, body, "application/json");
  Reply reply;
  if (!result) return reply;
  reply.status = result->status;
  reply.text = result->body;
  reply.retry_after = result->get_header_value("Retry-After");
  reply.body = json::parse(result->body, nullptr, false);
  return reply;
}

Reply Post(httplib::Client& client, const std::string& path, const json& body,
           const httplib::Headers& headers = {}) {
  return Post(client, path, body.dump(), headers);
}

Reply Get(httplib::Client& client, const std::string& path) {
  auto result = client.Get(path.c_str());
  Reply reply;
  if (!result) return reply;
  reply.status = result->status;
  reply.text = result->body;
  reply.body = json::parse(result->body, nullptr, false);
  return reply;
}

// The JSON of each `data:` event, and whether the stream ended with [DONE].
struct SseStream {
  std::vector<json> events;
  bool done = false;
};

SseStream ParseSse(const std::string& text) {
  SseStream out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    const std::string event = text.substr(start, end - start);
    start = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;  // comments (keep-alives)
    const std::string data = event.substr(6);
    EXPECT_FALSE(out.done) << "event after [DONE]: " << data;
    if (data == "[DONE]") {
      out.done = true;
    } else {
      out.events.push_back(json::parse(data, nullptr, false));
      EXPECT_FALSE(out.events.back().is_discarded()) << data;
    }
  }
  return out;
}

// Concatenated text of choice `index` in a completion or chat stream.
std::string StreamText(const SseStream& stream, int index, std::string* finish_reason = nullptr) {
  std::string text;
  for (const json& event : stream.events) {
    for (const json& choice : event.value("choices", json::array())) {
      if (choice["index"] != index) continue;
      if (choice.contains("text")) text += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content")) {
        text += choice["delta"]["content"].get<std::string>();
      }
      if (finish_reason && !choice["finish_reason"].is_null()) {
        *finish_reason = choice["finish_reason"];
      }
    }
  }
  return text;
}

// A metric's value from /metrics text; -1 when absent.
double Metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

void ExpectError(const Reply& reply, int status, const std::string& param = "") {
  EXPECT_EQ(reply.status, status) << reply.text;
  ASSERT_TRUE(reply.body.is_object()) << reply.text;
  ASSERT_TRUE(reply.body.contains("error")) << reply.text;
  const json& error = reply.body["error"];
  EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty());
  EXPECT_TRUE(error["type"].is_string());
  EXPECT_TRUE(error.contains("param") && error.contains("code")) << reply.text;
  if (!param.empty()) {
    EXPECT_EQ(error["param"], param) << reply.text;
  }
}

const char kLily[] = ", there was a little girl named Lily";

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    server_ = ServeProcess::Start({"--max-body", "64KiB", "--session-ttl", "120"}).release();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0) << server_->log();
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = server_->Client();
  }
  static ServeProcess* server_;
  std::unique_ptr<httplib::Client> client_;
};
ServeProcess* ServerTest::server_ = nullptr;

TEST_F(ServerTest, HealthAndModels) {
  Reply health = Get(*client_, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, json({{"status", "ok"}}));
  Reply models = Get(*client_, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.text;
  EXPECT_EQ(models.body["object"], "list");
  ASSERT_EQ(models.body["data"].size(), 1u);
  EXPECT_EQ(models.body["data"][0]["id"], "stories260K");
  EXPECT_EQ(models.body["data"][0]["object"], "model");
  EXPECT_EQ(Get(*client_, "/v1/models/stories260K").status, 200);
  ExpectError(Get(*client_, "/v1/models/gpt-4"), 404);
}

TEST_F(ServerTest, CompletionGreedy) {
  Reply reply = Post(*client_, "/v1/completions",
                     json{{"model", "stories260K"},
                          {"prompt", "Once upon a time"},
                          {"max_tokens", 12},
                          {"temperature", 0}});
  ASSERT_EQ(reply.status, 200) << reply.text;
  const json& body = reply.body;
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "stories260K");
  EXPECT_TRUE(body["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  EXPECT_TRUE(body["created"].is_number_integer());
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"].get<std::string>().rfind(kLily, 0), 0u) << reply.text;
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);  // BOS + 4
  EXPECT_EQ(body["usage"]["total_tokens"], 17);
  EXPECT_TRUE(body["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());
}

TEST_F(ServerTest, CompletionStreamMatchesWhole) {
  const json request = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
  Reply whole = Post(*client_, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  auto result = client_->Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_NE(result->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  SseStream stream = ParseSse(result->body);
  EXPECT_TRUE(stream.done);
  ASSERT_GE(stream.events.size(), 3u);
  std::string finish;
  EXPECT_EQ(StreamText(stream, 0, &finish), whole.body["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  for (size_t i = 0; i + 1 < stream.events.size(); ++i) {
    EXPECT_EQ(stream.events[i]["object"], "text_completion");
    EXPECT_TRUE(stream.events[i]["usage"].is_null());
  }
  const json& usage_chunk = stream.events.back();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 16);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], 5);
}

TEST_F(ServerTest, PromptFormsAndChoices) {
  Reply text = Post(*client_, "/v1/completions",
                    json{{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(text.status, 200);
  Reply tokenized =
      Post(*client_, "/tokenize", json{{"content", "Once upon a time"}, {"add_special", true}});
  ASSERT_EQ(tokenized.status, 200) << tokenized.text;
  Reply ids =
      Post(*client_, "/v1/completions",
           json{{"prompt", tokenized.body["tokens"]}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(ids.status, 200) << ids.text;
  EXPECT_EQ(ids.body["choices"][0]["text"], text.body["choices"][0]["text"]);

  Reply list = Post(*client_, "/v1/completions",
                    json{{"prompt", {"Once upon a time", "The cat"}},
                         {"max_tokens", 6},
                         {"temperature", 0},
                         {"n", 2}});
  ASSERT_EQ(list.status, 200) << list.text;
  ASSERT_EQ(list.body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(list.body["choices"][i]["index"], i);
  EXPECT_EQ(list.body["choices"][0]["text"], text.body["choices"][0]["text"]);
  EXPECT_EQ(list.body["choices"][1]["text"], text.body["choices"][0]["text"]);  // greedy
  EXPECT_NE(list.body["choices"][2]["text"], text.body["choices"][0]["text"]);
  EXPECT_EQ(list.body["usage"]["completion_tokens"], 24);

  // Seeded sampling: the same seed gives the same choices; n choices differ from each other.
  const json sampled = {{"prompt", "Once upon a time"},
                        {"max_tokens", 24},
                        {"temperature", 1.0},
                        {"seed", 1234},
                        {"n", 3}};
  Reply a = Post(*client_, "/v1/completions", sampled);
  Reply b = Post(*client_, "/v1/completions", sampled);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["choices"], b.body["choices"]);
  EXPECT_FALSE(a.body["choices"][0]["text"] == a.body["choices"][1]["text"] &&
               a.body["choices"][1]["text"] == a.body["choices"][2]["text"]);
}

TEST_F(ServerTest, StopStringsAndLogprobs) {
  Reply reply = Post(*client_, "/v1/completions",
                     json{{"prompt", "Once upon a time"},
                          {"max_tokens", 40},
                          {"temperature", 0},
                          {"stop", {"Lily"}},
                          {"logprobs", 2}});
  ASSERT_EQ(reply.status, 200) << reply.text;
  const json& choice = reply.body["choices"][0];
  EXPECT_EQ(choice["text"], ", there was a little girl named ");
  EXPECT_EQ(choice["finish_reason"], "stop");
  const json& lp = choice["logprobs"];
  ASSERT_TRUE(lp.is_object()) << reply.text;
  ASSERT_FALSE(lp["tokens"].empty());
  EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  EXPECT_EQ(lp["tokens"].size(), lp["top_logprobs"].size());
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
  EXPECT_EQ(lp["text_offset"][0], 0);

  Reply chat = Post(*client_, "/v1/chat/completions",
                    json{{"messages", {{{"role", "user"}, {"content", "Tell a story"}}}},
                         {"max_tokens", 5},
                         {"temperature", 0},
                         {"logprobs", true},
                         {"top_logprobs", 3}});
  ASSERT_EQ(chat.status, 200) << chat.text;
  const json& content = chat.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u) << chat.text;
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST_F(ServerTest, ChatWholeAndStreamed) {
  const json request = {{"model", "stories260K"},
                        {"messages",
                         {{{"role", "system"}, {"content", "You tell stories."}},
                          {{"role", "user"}, {"content", "Once upon a time"}}}},
                        {"max_completion_tokens", 12},
                        {"temperature", 0}};
  Reply whole = Post(*client_, "/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  EXPECT_EQ(whole.body["object"], "chat.completion");
  EXPECT_TRUE(whole.body["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
  const json& message = whole.body["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_FALSE(message["content"].get<std::string>().empty());
  EXPECT_EQ(whole.body["usage"]["completion_tokens"], 12);

  json streamed = request;
  streamed["stream"] = true;
  auto result = client_->Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(result);
  SseStream stream = ParseSse(result->body);
  EXPECT_TRUE(stream.done);
  ASSERT_GE(stream.events.size(), 2u);
  EXPECT_EQ(stream.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(stream.events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string finish;
  EXPECT_EQ(StreamText(stream, 0, &finish), message["content"]);
  EXPECT_EQ(finish, "length");
  EXPECT_FALSE(stream.events.back().contains("usage"));  // not asked for
}

TEST_F(ServerTest, TokenizeAndDetokenize) {
  Reply tokens = Post(*client_, "/tokenize", json{{"content", "Once upon a time"}});
  ASSERT_EQ(tokens.status, 200) << tokens.text;
  ASSERT_EQ(tokens.body["tokens"].size(), 4u);
  Reply with_bos =
      Post(*client_, "/tokenize", json{{"content", "Once upon a time"}, {"add_special", true}});
  EXPECT_EQ(with_bos.body["tokens"].size(), 5u);
  Reply pieces =
      Post(*client_, "/tokenize", json{{"content", "Once upon a time"}, {"with_pieces", true}});
  ASSERT_EQ(pieces.body["tokens"].size(), 4u);
  EXPECT_EQ(pieces.body["tokens"][0]["id"], tokens.body["tokens"][0]);
  EXPECT_TRUE(pieces.body["tokens"][0]["piece"].is_string());
  Reply text = Post(*client_, "/detokenize", json{{"tokens", tokens.body["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.text;
  EXPECT_EQ(text.body["content"], "Once upon a time");
  ExpectError(Post(*client_, "/detokenize", json{{"tokens", {1, 100000}}}), 400, "tokens");
  ExpectError(Post(*client_, "/tokenize", json{{"content", 5}}), 400, "content");
}

TEST_F(ServerTest, Errors) {
  ExpectError(Post(*client_, "/v1/completions", std::string("{not json")), 400);
  ExpectError(Post(*client_, "/v1/completions", json{{"prompt", "x"}, {"temperature", 9}}), 400,
              "temperature");
  ExpectError(Post(*client_, "/v1/chat/completions", json{{"messages", "hi"}}), 400, "messages");
  ExpectError(
      Post(*client_, "/v1/completions", json{{"prompt", "Once upon a time"}, {"model", "gpt-4"}}),
      404);
  ExpectError(Get(*client_, "/v1/nothing-here"), 404);
  ExpectError(Post(*client_, "/v1/embeddings", json{{"input", "x"}}), 404);
  // Beyond the context: both numbers in the message.
  Reply too_long =
      Post(*client_, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4000}});
  ExpectError(too_long, 400, "max_tokens");
  const std::string message = too_long.body["error"]["message"];
  EXPECT_NE(message.find("4000"), std::string::npos) << message;
  EXPECT_NE(message.find("4005"), std::string::npos) << message;
  Reply ctx = Post(*client_, "/tokenize", json{{"content", "x"}});
  ASSERT_EQ(ctx.status, 200);
  // A prompt that alone fills the context.
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
  ExpectError(Post(*client_, "/v1/completions", json{{"prompt", long_prompt}}), 400, "prompt");
  // Body over --max-body (64 KiB here).
  ExpectError(Post(*client_, "/v1/completions", json{{"prompt", std::string(100 * 1024, 'a')}}),
              413);
  // The server is still fine.
  EXPECT_EQ(Get(*client_, "/health").status, 200);
}

TEST_F(ServerTest, SessionsReuseBlocksAndRelease) {
  const std::string first =
      "Once upon a time, there was a little girl named Lily. She loved to "
      "play outside in the park. One day, she saw a big tree.";
  Reply turn1 = Post(*client_, "/v1/completions",
                     json{{"prompt", first},
                          {"max_tokens", 20},
                          {"temperature", 0},
                          {"session_id", "conv-1"},
                          {"cache_salt", "sessions"}});
  ASSERT_EQ(turn1.status, 200) << turn1.text;
  const std::string second =
      first + turn1.body["choices"][0]["text"].get<std::string>() + " Then her mom came.";
  Reply turn2 = Post(
      *client_, "/v1/completions",
      json{{"prompt", second}, {"max_tokens", 8}, {"temperature", 0}, {"cache_salt", "sessions"}},
      {{"X-Session-Id", "conv-1"}});
  ASSERT_EQ(turn2.status, 200) << turn2.text;
  EXPECT_GT(turn2.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0)
      << turn2.text;
  auto deleted = client_->Delete("/v1/sessions/conv-1");
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200) << deleted->body;
  auto again = client_->Delete("/v1/sessions/conv-1");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
  auto unknown = client_->Delete("/v1/sessions/never-was");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_TRUE(json::parse(unknown->body).contains("error"));
}

TEST_F(ServerTest, CacheSaltSeparatesTenants) {
  const std::string prompt =
      "Tom had a red ball. He liked to throw it high in the sky and catch "
      "it with his two hands every day.";
  auto cached = [&](const std::string& salt) {
    Reply reply =
        Post(*client_, "/v1/completions",
             json{{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"cache_salt", salt}});
    EXPECT_EQ(reply.status, 200) << reply.text;
    return reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_GT(cached("tenant-a"), 0);
  EXPECT_EQ(cached("tenant-b"), 0);
}

// Opens a raw connection, sends a streaming completion, and closes after `until` shows up.
void StreamAndHangUp(int port, const std::string& until) {
  const json request = {{"prompt", "Once upon a time"},
                        {"max_tokens", 110},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"stream", true}};
  const std::string body = request.dump();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  std::string received;
  char buffer[4096];
  while (received.find(until) == std::string::npos) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 0) << received;
    received.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
}

// Polls /metrics (bounded) until at least `ended` requests have ended (finished or aborted), and
// nothing runs or waits and no KV block is referenced.
std::string WaitUntilIdle(httplib::Client& client, double ended) {
  std::string metrics;
  for (int i = 0; i < 500; ++i) {
    metrics = Get(client, "/metrics").text;
    if (Metric(metrics, "kvserve:e2e_request_latency_seconds_count") >= ended &&
        Metric(metrics, "kvserve:kv_cache_blocks{state=\"used\"}") == 0 &&
        Metric(metrics, "kvserve:num_requests_running") == 0 &&
        Metric(metrics, "kvserve:num_requests_waiting") == 0) {
      return metrics;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the server did not become idle:\n" << metrics;
  return metrics;
}

TEST_F(ServerTest, DisconnectMidStreamFreesBlocks) {
  const double ended =
      Metric(Get(*client_, "/metrics").text, "kvserve:e2e_request_latency_seconds_count");
  StreamAndHangUp(server_->port(), "data: {");
  WaitUntilIdle(*client_, ended + 1);
}

TEST(ServerDisconnectTest, QueuedStreamsOfGoneClientsAreAborted) {
  signal(SIGPIPE, SIG_IGN);
  // One sequence at a time: the later streams wait in the queue while their clients hang up, so
  // their first token writes fail and the server must abort them.
  auto server = ServeProcess::Start({"--max-num-seqs", "1"});
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 4;
  for (int i = 0; i < kClients; ++i) StreamAndHangUp(server->port(), "\r\n\r\n");
  auto client = server->Client();
  const std::string metrics = WaitUntilIdle(*client, kClients);
  const double aborted =
      Metric(metrics, "kvserve:request_success_total{finished_reason=\"abort\"}");
  EXPECT_GE(aborted, 1) << metrics;
  std::printf("[ info ] %d streams hung up: %g aborted, %g tokens generated of %d asked\n",
              kClients, aborted, Metric(metrics, "kvserve:generation_tokens_total"),
              kClients * 110);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST_F(ServerTest, ConcurrentAnswersEqualSequential) {
  const std::vector<std::string> prompts = {"Once upon a time", "The dog",     "Lily and Tom",
                                            "One day, a bird",  "The sun was", "A little boy"};
  auto request = [&](size_t i, bool sampled) {
    json body = {{"prompt", prompts[i]}, {"max_tokens", 24}, {"ignore_eos", true}};
    if (sampled) {
      body["temperature"] = 0.9;
      body["seed"] = 100 + i;
    } else {
      body["temperature"] = 0;
    }
    return body;
  };
  std::vector<std::string> sequential;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (bool sampled : {false, true}) {
      Reply reply = Post(*client_, "/v1/completions", request(i, sampled));
      ASSERT_EQ(reply.status, 200) << reply.text;
      sequential.push_back(reply.body["choices"][0]["text"]);
    }
  }
  std::vector<std::string> concurrent(sequential.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int sampled = 0; sampled < 2; ++sampled) {
      threads.emplace_back([&, i, sampled] {
        auto client = server_->Client();
        Reply reply = Post(*client, "/v1/completions", request(i, sampled == 1));
        if (reply.status == 200) concurrent[2 * i + sampled] = reply.body["choices"][0]["text"];
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(concurrent, sequential);
}

TEST_F(ServerTest, MetricsAfterTraffic) {
  ASSERT_EQ(Post(*client_, "/v1/completions",
                 json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}})
                .status,
            200);
  auto result = client_->Get("/metrics");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_NE(result->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const std::string& text = result->body;
  EXPECT_GT(Metric(text, "kvserve:generation_tokens_total"), 0);
  EXPECT_GT(Metric(text, "kvserve:prompt_tokens_total"), 0);
  EXPECT_GT(Metric(text, "kvserve:request_success_total{finished_reason=\"length\"}"), 0);
  EXPECT_GT(Metric(text, "kvserve:time_to_first_token_seconds_count"), 0);
  EXPECT_GT(Metric(text, "kvserve:e2e_request_latency_seconds_count"), 0);
  EXPECT_GT(Metric(text, "kvserve:e2e_request_latency_seconds_bucket{le=\"+Inf\"}"), 0);
  EXPECT_GT(Metric(text, "process_resident_memory_bytes"), 1e6);
  EXPECT_GE(Metric(text, "process_cpu_seconds_total"), 0);
  for (const char* name :
       {"kvserve:num_requests_waiting", "kvserve:kv_cache_usage_perc",
        "kvserve:kv_cache_blocks{state=\"free\"}", "kvserve:kv_cache_blocks{state=\"cached\"}",
        "kvserve:prefix_cache_queries_total", "kvserve:prefix_cache_hits_total",
        "kvserve:num_preemptions_total", "kvserve:inter_token_latency_seconds_sum"}) {
    EXPECT_GE(Metric(text, name), 0) << name;
  }
}

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
                                         {"--max-body", "-1"}}) {
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
  Reply completion = Post(*client_, "/v1/completions", json{{"prompt", "x"}});
  ExpectError(completion, 503);
  server_->BeginDrain();
  EXPECT_EQ(Get(*client_, "/health").body["status"], "draining");
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
