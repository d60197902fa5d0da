// `kvserve serve` end to end on loopback: the real binary with stories260K.gguf on a free port,
// talked to over HTTP. Every endpoint, streaming and not, error statuses, sessions and cache
// isolation, client disconnects, metrics, and concurrent == sequential answers. Auth, limits and
// shutdown are in server_limits_test.cc.
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

const char kLily[] = ", there was a little girl named Lily";

class ServerTest : public SharedServeTest<ServerTest> {
 public:
  static std::vector<std::string> ServeFlags() {
    return {"--max-body", "64KiB", "--session-ttl", "120", "--replica-name", "replica-a"};
  }
};

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
  ExpectError(Get(*client_, "/v1/embeddings/x"), 404);
  // stories260K is a llama: no embeddings, said by name (embeddings_server_test.cc serves them).
  ExpectError(Post(*client_, "/v1/embeddings", json{{"input", "x"}}), 400, "model");
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

TEST_F(ServerTest, EveryResponseNamesItsReplica) {
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}}.dump();
  std::vector<httplib::Result> results;
  results.push_back(client_->Get("/health"));
  results.push_back(client_->Get("/v1/models"));
  results.push_back(client_->Get("/no/such/route"));
  results.push_back(client_->Post("/v1/completions", body, "application/json"));
  results.push_back(client_->Post("/v1/completions", "{not json", "application/json"));
  results.push_back(client_->Post(
      "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}, {"stream", true}}.dump(),
      "application/json"));
  results.push_back(client_->Get("/metrics"));
  std::vector<int> statuses;
  for (const auto& result : results) {
    ASSERT_TRUE(result);
    statuses.push_back(result->status);
    EXPECT_EQ(result->get_header_value("X-Kvserve-Replica"), "replica-a") << result->status;
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 404, 200, 400, 200, 200}));
  EXPECT_EQ(Metric(results.back()->body, "kvserve:replica_info{replica=\"replica-a\"}"), 1);
}

}  // namespace
}  // namespace kvserve
