// The server's engine-free parts: request parsing and validation (every error names its
// parameter), OpenAI response and SSE shapes, API-key checks, and the Prometheus text format.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "io/gguf_reader.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/completion_request.h"
#include "server/completion_response.h"
#include "server/metrics.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TempDir;
using nlohmann::json;

constexpr int kVocab = 512;

CompletionRequest ParseOk(const json& body, CompletionKind kind = CompletionKind::kText) {
  CompletionRequest out;
  auto error = ParseCompletionRequest(body, kind, kVocab, out);
  EXPECT_FALSE(error.has_value()) << body.dump() << " -> " << (error ? error->message : "");
  return out;
}

ApiError ParseError(const json& body, CompletionKind kind = CompletionKind::kText) {
  CompletionRequest out;
  auto error = ParseCompletionRequest(body, kind, kVocab, out);
  EXPECT_TRUE(error.has_value()) << body.dump() << " was accepted";
  return error.value_or(ApiError{});
}

TEST(CompletionRequestTest, PromptForms) {
  CompletionRequest r = ParseOk({{"prompt", "Once upon"}});
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once upon");
  EXPECT_FALSE(r.prompts[0].is_tokens);

  r = ParseOk({{"prompt", {1, 2, 3}}});
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));

  r = ParseOk({{"prompt", {"a", "b"}}});
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text, "b");

  r = ParseOk({{"prompt", {{1, 5}, {7}}}});
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{7}));
}

TEST(CompletionRequestTest, Defaults) {
  CompletionRequest r = ParseOk({{"prompt", "x"}});
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.seeded);
}

TEST(CompletionRequestTest, AllParameters) {
  CompletionRequest r = ParseOk({{"prompt", "x"},
                                 {"model", "m"},
                                 {"max_tokens", 7},
                                 {"temperature", 0},
                                 {"top_p", 0.5},
                                 {"top_k", 40},
                                 {"min_p", 0.1},
                                 {"presence_penalty", 0.5},
                                 {"frequency_penalty", -0.5},
                                 {"repetition_penalty", 1.1},
                                 {"seed", 42},
                                 {"stop", {"\n", "END"}},
                                 {"n", 3},
                                 {"logprobs", 2},
                                 {"logit_bias", {{"13", -100}, {"7", 5.5}}},
                                 {"user", "u1"},
                                 {"stream", true},
                                 {"stream_options", {{"include_usage", true}}},
                                 {"cache_salt", "s"},
                                 {"ignore_eos", true}});
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_FLOAT_EQ(r.sampling.logit_bias.at(13), -100.0f);
  EXPECT_FLOAT_EQ(r.sampling.logit_bias.at(7), 5.5f);
  EXPECT_EQ(r.user, "u1");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.cache_salt, "s");
  EXPECT_TRUE(r.ignore_eos);
}

TEST(CompletionRequestTest, MaxCompletionTokensWins) {
  CompletionRequest r = ParseOk({{"prompt", "x"}, {"max_tokens", 5}, {"max_completion_tokens", 9}});
  EXPECT_EQ(r.max_tokens, 9);
}

TEST(CompletionRequestTest, NullMeansAbsent) {
  CompletionRequest r = ParseOk({{"prompt", "x"}, {"temperature", nullptr}, {"stop", nullptr}});
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_TRUE(r.stop.empty());
}

TEST(CompletionRequestTest, ErrorsNameTheParameterAndValue) {
  struct Case {
    json body;
    std::string param;
    std::string in_message;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "x"}, {"temperature", 3}}, "temperature", "3"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature", "\"hot\""},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p", "0"},
      {{{"prompt", "x"}, {"top_k", -2}}, "top_k", "-2"},
      {{{"prompt", "x"}, {"min_p", 1.5}}, "min_p", "1.5"},
      {{{"prompt", "x"}, {"presence_penalty", 2.5}}, "presence_penalty", "2.5"},
      {{{"prompt", "x"}, {"frequency_penalty", -3}}, "frequency_penalty", "-3"},
      {{{"prompt", "x"}, {"repetition_penalty", 0}}, "repetition_penalty", "0"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens", "0"},
      {{{"prompt", "x"}, {"max_tokens", 2.5}}, "max_tokens", "2.5"},
      {{{"prompt", "x"}, {"n", 0}}, "n", "0"},
      {{{"prompt", "x"}, {"n", 1000}}, "n", "1000"},
      {{{"prompt", "x"}, {"seed", "abc"}}, "seed", "abc"},
      {{{"prompt", "x"}, {"stop", 5}}, "stop", "5"},
      {{{"prompt", "x"}, {"stop", {"a", 1}}}, "stop[1]", "1"},
      {{{"prompt", "x"}, {"stop", {""}}}, "stop", "empty"},
      {{{"prompt", "x"}, {"logprobs", 50}}, "logprobs", "50"},
      {{{"prompt", "x"}, {"logprobs", true}}, "logprobs", "true"},
      {{{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, "logit_bias", "abc"},
      {{{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}}, "logit_bias", "99999"},
      {{{"prompt", "x"}, {"logit_bias", {{"5", 200}}}}, "logit_bias", "200"},
      {{{"prompt", "x"}, {"stream", "yes"}}, "stream", "yes"},
      {{{"prompt", "x"}, {"stream_options", {{"include_usage", 1}}}},
       "stream_options.include_usage",
       "include_usage"},
      {{{"prompt", {1, 9999}}}, "prompt", "9999"},
      {{{"prompt", {1, -1}}}, "prompt", "-1"},
      {{{"prompt", 5}}, "prompt", "5"},
      {{{"prompt", json::array()}}, "prompt", "empty"},
      {{{"prompt", {"a", 3}}}, "prompt[1]", "3"},
      {{{"prompt", "x"}, {"model", 3}}, "model", "3"},
      {{{"prompt", "x"}, {"echo", true}}, "echo", "echo"},
      {{{"prompt", "x"}, {"best_of", 3}}, "best_of", "best_of"},
      {{{"prompt", "x"}, {"session_id", "s"}, {"n", 2}}, "session_id", "n = 1"},
      {{{"prompt", "x"}, {"session_id", std::string(300, 'a')}}, "session_id", "300"},
      {json::object(), "prompt", "required"},
  };
  for (const Case& c : cases) {
    ApiError error = ParseError(c.body);
    EXPECT_EQ(error.http_status, 400) << c.body.dump();
    EXPECT_EQ(error.param, c.param) << c.body.dump() << ": " << error.message;
    EXPECT_NE(error.message.find(c.in_message), std::string::npos)
        << c.body.dump() << ": " << error.message;
  }
}

TEST(CompletionRequestTest, ChatMessages) {
  CompletionRequest r = ParseOk(
      {{"messages",
        {{{"role", "developer"}, {"content", "be brief"}},
         {{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "he"}}, {{"type", "text"}, {"text", "llo"}}}}}}},
       {"logprobs", true},
       {"top_logprobs", 3}},
      CompletionKind::kChat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
}

TEST(CompletionRequestTest, ChatErrors) {
  const CompletionKind chat = CompletionKind::kChat;
  EXPECT_EQ(ParseError({{"prompt", "x"}}, chat).param, "messages");
  EXPECT_EQ(ParseError({{"messages", json::array()}}, chat).param, "messages");
  EXPECT_EQ(ParseError({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, chat).param,
            "messages");
  EXPECT_EQ(ParseError({{"messages", {{{"role", "user"}}}}}, chat).param, "messages");
  EXPECT_EQ(ParseError({{"messages", {{{"role", "user"}, {"content", 5}}}}}, chat).param,
            "messages[0].content");
  EXPECT_EQ(
      ParseError({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, chat)
          .param,
      "messages");
  const json user = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(ParseError({{"messages", user}, {"top_logprobs", 2}}, chat).param, "top_logprobs");
  EXPECT_EQ(ParseError({{"messages", user}, {"logprobs", 2}}, chat).param, "logprobs");
  EXPECT_EQ(ParseError({{"messages", user}, {"tools", {{{"type", "function"}}}}}, chat).param,
            "tools[0].function");
  EXPECT_EQ(ParseError({{"prompt", "x"}, {"tools", json::array()}}).param, "tools");
}

TEST(ApiErrorTest, OpenAiShape) {
  const json body = json::parse(ApiError::BadRequest("bad 'n'", "n").Body());
  ASSERT_TRUE(body.contains("error"));
  EXPECT_EQ(body["error"]["message"], "bad 'n'");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_TRUE(body["error"]["code"].is_null());
  const json unauthorized = ApiError::Unauthorized("no").ToJson();
  EXPECT_TRUE(unauthorized["error"]["param"].is_null());
  EXPECT_EQ(ApiError::TooManyRequests("full", 2).retry_after_s, 2);
}

TEST(ApiErrorTest, JsonBodies) {
  json out;
  EXPECT_TRUE(ParseJsonBody("", out).has_value());
  EXPECT_TRUE(ParseJsonBody("{", out).has_value());
  EXPECT_TRUE(ParseJsonBody("[1]", out).has_value());
  EXPECT_NE(ParseJsonBody("{\"a\": tru}", out)->message.find("byte"), std::string::npos);
  EXPECT_FALSE(ParseJsonBody("{\"a\": 1}", out).has_value());
  // Deep nesting is parsed without recursion limits crashing the server.
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  EXPECT_TRUE(ParseJsonBody(deep, out).has_value());  // an array, not an object
  // Invalid UTF-8 is an error, not a crash.
  EXPECT_TRUE(ParseJsonBody("{\"a\": \"\xff\"}", out).has_value());
}

class ShaperTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = GgufFile::Open(ModelPath("stories260K.gguf"));
    ASSERT_TRUE(file.ok()) << file.message();
    auto tokenizer = Tokenizer::FromGguf(*file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    tokenizer_ = std::move(tokenizer).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* ShaperTest::tokenizer_ = nullptr;

TEST_F(ShaperTest, WholeCompletion) {
  ResponseShaper shaper(CompletionKind::kText, "cmpl-1", "m", 1700000000, *tokenizer_, false);
  const json out =
      shaper.Whole({ChoiceResult{.index = 0, .text = "hi", .finish_reason = "stop"}},
                   UsageTotals{.prompt_tokens = 4, .completion_tokens = 2, .cached_tokens = 1});
  EXPECT_EQ(out["id"], "cmpl-1");
  EXPECT_EQ(out["object"], "text_completion");
  EXPECT_EQ(out["created"], 1700000000);
  EXPECT_EQ(out["model"], "m");
  EXPECT_EQ(out["choices"][0]["text"], "hi");
  EXPECT_EQ(out["choices"][0]["index"], 0);
  EXPECT_TRUE(out["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(out["usage"]["completion_tokens"], 2);
  EXPECT_EQ(out["usage"]["total_tokens"], 6);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

TEST_F(ShaperTest, WholeChatWithLogprobs) {
  ResponseShaper shaper(CompletionKind::kChat, "chatcmpl-1", "m", 1, *tokenizer_, true);
  const int32_t a = tokenizer_->Encode("Once", false, false).at(0);
  const int32_t b = tokenizer_->Encode("upon", false, false).at(0);
  ChoiceResult choice{.index = 0, .text = "x", .finish_reason = "length"};
  choice.logprobs.push_back(
      LogprobEntry{.token = a, .logprob = -0.5f, .top = {{a, -0.5f}, {b, -1.5f}}});
  const json out = shaper.Whole({choice}, UsageTotals{});
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(out["choices"][0]["message"]["content"], "x");
  const json& content = out["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], tokenizer_->TokenPiece(a));
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"].size(), tokenizer_->TokenPiece(a).size());
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], tokenizer_->TokenPiece(b));
}

TEST_F(ShaperTest, CompletionLogprobsAreParallelArrays) {
  ResponseShaper shaper(CompletionKind::kText, "c", "m", 1, *tokenizer_, true);
  const int32_t a = tokenizer_->Encode("Once", false, false).at(0);
  ChoiceResult choice{.index = 0, .text = "ab", .finish_reason = "stop"};
  choice.logprobs.push_back(LogprobEntry{.token = a, .logprob = -1, .top = {{a, -1}}});
  choice.logprobs.push_back(LogprobEntry{.token = a, .logprob = -2, .text_offset = 1});
  const json lp = shaper.Whole({choice}, UsageTotals{})["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["token_logprobs"][1], -2.0);
  EXPECT_EQ(lp["top_logprobs"][0][tokenizer_->TokenPiece(a)], -1.0);
  EXPECT_TRUE(lp["top_logprobs"][1].is_null());
  EXPECT_EQ(lp["text_offset"][1], 1);
}

TEST_F(ShaperTest, ChunksAndSse) {
  ResponseShaper chat(CompletionKind::kChat, "c", "m", 1, *tokenizer_, false);
  json first = chat.Chunk(ChoiceDelta{.index = 1, .first = true}, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["index"], 1);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  json last = chat.Chunk(ChoiceDelta{.finish_reason = "stop"}, false);
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  json usage = chat.UsageChunk(UsageTotals{.prompt_tokens = 3, .completion_tokens = 4});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);

  ResponseShaper text(CompletionKind::kText, "c", "m", 1, *tokenizer_, false);
  json piece = text.Chunk(ChoiceDelta{.text = " upon"}, false);
  EXPECT_EQ(piece["object"], "text_completion");
  EXPECT_EQ(piece["choices"][0]["text"], " upon");

  const std::string event = Sse(piece);
  EXPECT_EQ(event.rfind("data: {", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_EQ(event.find('\n'), event.size() - 2);  // one line: JSON never holds a raw newline
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  // Partial UTF-8 in a delta is replaced, not thrown on.
  EXPECT_NO_THROW(Sse(text.Chunk(ChoiceDelta{.text = "\xe2\x96"}, false)));
}

TEST(AuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secreT", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret1", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secre", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secretsecret", "secret"));  // wraps around the secret
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthTest, BearerKeys) {
  ApiKeys none;
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.Check(""), "anon");
  auto keys = ApiKeys::FromList({"k-one", "k-two"});
  ASSERT_TRUE(keys.ok()) << keys.message();
  EXPECT_TRUE(keys->enabled());
  auto one = keys->Check("Bearer k-one");
  auto two = keys->Check("Bearer k-two");
  ASSERT_TRUE(one && two);
  EXPECT_NE(*one, *two);  // tenants differ by key
  EXPECT_EQ(*one, ApiKeys::TenantTag("k-one"));
  EXPECT_FALSE(keys->Check("Bearer k-three"));
  EXPECT_FALSE(keys->Check("k-one"));
  EXPECT_FALSE(keys->Check("Basic k-one"));
  EXPECT_FALSE(keys->Check("Bearer "));
  EXPECT_FALSE(keys->Check(""));
  EXPECT_FALSE(ApiKeys::FromList({""}).ok());
  EXPECT_FALSE(ApiKeys::FromList({"has space"}).ok());
}

TEST(AuthTest, KeyFile) {
  const std::string path = TempDir() + "/keys.txt";
  std::ofstream(path) << "# tenants\n\n  alpha  \r\nbeta\n";
  auto keys = ApiKeys::FromFile(path);
  ASSERT_TRUE(keys.ok()) << keys.message();
  EXPECT_TRUE(keys->Check("Bearer alpha"));
  EXPECT_TRUE(keys->Check("Bearer beta"));
  EXPECT_FALSE(keys->Check("Bearer # tenants"));
  const std::string empty = TempDir() + "/empty.txt";
  std::ofstream(empty) << "# nothing\n";
  auto none = ApiKeys::FromFile(empty);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find(empty), std::string::npos);
  EXPECT_FALSE(ApiKeys::FromFile(TempDir() + "/missing.txt").ok());
}

TEST(MetricsTest, HistogramIsCumulative) {
  Histogram histogram({0.1, 1.0});
  histogram.Observe(0.05);
  histogram.Observe(0.1);  // le is inclusive
  histogram.Observe(0.5);
  histogram.Observe(7);
  std::string out;
  histogram.Render("h_seconds", "help", out);
  EXPECT_NE(out.find("# TYPE h_seconds histogram\n"), std::string::npos);
  EXPECT_NE(out.find("h_seconds_bucket{le=\"0.10000000000000001\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_seconds_sum 7.6500000000000004\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_seconds_count 4\n"), std::string::npos) << out;
}

TEST(MetricsTest, PrometheusTextFormat) {
  ServerMetrics metrics;
  metrics.ObserveTimeToFirstToken(0.02);
  metrics.ObserveInterTokenLatency(0.003);
  metrics.ObserveRequest(0.5, FinishReason::kStop);
  metrics.ObserveRequest(0.7, FinishReason::kAbort);
  const EngineStats stats{.running = 2,
                          .waiting = 1,
                          .blocks_total = 10,
                          .blocks_used = 4,
                          .blocks_cached = 3,
                          .blocks_free = 3,
                          .prefix_queries_tokens = 100,
                          .prefix_hits_tokens = 40,
                          .preemptions = 1,
                          .prompt_tokens = 60,
                          .generation_tokens = 20};
  const std::string text = metrics.Render(stats);
  for (const char* expected :
       {"kvserve:num_requests_running 2\n", "kvserve:num_requests_waiting 1\n",
        "kvserve:kv_cache_usage_perc 0.40000000000000002\n",
        "kvserve:kv_cache_blocks{state=\"used\"} 4\n",
        "kvserve:kv_cache_blocks{state=\"cached\"} 3\n",
        "kvserve:kv_cache_blocks{state=\"free\"} 3\n", "kvserve:prefix_cache_queries_total 100\n",
        "kvserve:prefix_cache_hits_total 40\n", "kvserve:num_preemptions_total 1\n",
        "kvserve:prompt_tokens_total 60\n", "kvserve:generation_tokens_total 20\n",
        "kvserve:request_success_total{finished_reason=\"stop\"} 1\n",
        "kvserve:request_success_total{finished_reason=\"abort\"} 1\n",
        "kvserve:request_success_total{finished_reason=\"length\"} 0\n",
        "kvserve:time_to_first_token_seconds_count 1\n",
        "kvserve:inter_token_latency_seconds_count 1\n",
        "kvserve:e2e_request_latency_seconds_count 2\n", "process_resident_memory_bytes ",
        "process_cpu_seconds_total "}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected;
  }
  // Every line is a comment or `name{labels} value`, and every sample's family has a TYPE.
  const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-z_]+="[^"]*"\})? (\S+))");
  const std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|histogram))");
  std::set<std::string> typed;
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, match, type_line)) {
      EXPECT_TRUE(typed.insert(match[1]).second) << "TYPE twice: " << line;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, match, sample)) << "bad line: " << line;
    std::string family = match[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!typed.count(family) && family.size() > strlen(suffix) &&
          family.substr(family.size() - strlen(suffix)) == suffix) {
        family.resize(family.size() - strlen(suffix));
      }
    }
    EXPECT_TRUE(typed.count(family)) << "no TYPE before " << line;
    EXPECT_NO_THROW((void)std::stod(match[3].str())) << line;
    ++samples;
  }
  EXPECT_GT(samples, 60);
}

TEST(MetricsTest, ProcessStats) {
  const ProcessStats stats = ReadProcessStats();
  EXPECT_GT(stats.resident_bytes, 1u << 20);
  EXPECT_GE(stats.cpu_seconds, 0.0);
  EXPECT_GT(stats.open_fds, 2);
  EXPECT_GT(stats.start_time_s, 1.6e9);
}

#if defined(__GLIBC__)
// The soak's leak check reads this gauge at idle points: it must follow live allocations, both
// ways, to the byte range of what was allocated.
TEST(MetricsTest, HeapInUseFollowsAllocations) {
  constexpr size_t kChunk = 4096;
  constexpr int kChunks = 256;  // 1 MiB in chunks below the mmap threshold: arena memory
  const int64_t before = ReadProcessStats().heap_in_use_bytes;
  ASSERT_GT(before, 0);
  std::vector<std::unique_ptr<char[]>> chunks;
  for (int i = 0; i < kChunks; ++i) chunks.push_back(std::make_unique<char[]>(kChunk));
  const int64_t held = ReadProcessStats().heap_in_use_bytes;
  EXPECT_GE(held - before, int64_t{kChunk} * kChunks);
  EXPECT_LT(held - before, int64_t{kChunk} * kChunks + (64 << 10));
  chunks.clear();
  const int64_t after = ReadProcessStats().heap_in_use_bytes;
  EXPECT_LT(after - before, 64 << 10);
}
#endif

}  // namespace
}  // namespace kvserve
