// Context overflow over HTTP (`kvserve serve` on stories260K, context 128): the request field
// "context_overflow" and "pinned_prefix_tokens", the "truncated" / "dropped_tokens" answer fields
// (whole and streamed), the chat route's default pin (the rendered system message), the server
// flag --context-overflow shift, the Prometheus counters, and the default "error" unchanged.
#include "support/cli.h"
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

class ServerShiftTest : public SharedServeTest<ServerShiftTest> {
 public:
  static std::vector<std::string> ServeFlags() { return {}; }
};

json LongCompletion(int max_tokens) {
  return {{"prompt", "Once upon a time"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

std::vector<int32_t> Tokens(httplib::Client& client, const std::string& text) {
  Reply reply = Post(client, "/tokenize", json{{"content", text}, {"add_special", true}});
  EXPECT_EQ(reply.status, 200) << reply.text;
  return reply.body["tokens"].get<std::vector<int32_t>>();
}

TEST_F(ServerShiftTest, DefaultErrorIsUnchangedAndAnswersCarryNoShiftFields) {
  ExpectError(Post(*client_, "/v1/completions", LongCompletion(300)), 400, "max_tokens");
  Reply within = Post(*client_, "/v1/completions", LongCompletion(40));
  ASSERT_EQ(within.status, 200) << within.text;
  EXPECT_FALSE(within.body["choices"][0].contains("truncated")) << within.text;
  EXPECT_FALSE(within.body["choices"][0].contains("dropped_tokens")) << within.text;
  EXPECT_FALSE(within.body["usage"].contains("dropped_tokens")) << within.text;
  json bad = LongCompletion(40);
  bad["context_overflow"] = "wrap";
  ExpectError(Post(*client_, "/v1/completions", bad), 400, "context_overflow");
  bad["context_overflow"] = true;
  ExpectError(Post(*client_, "/v1/completions", bad), 400, "context_overflow");
  json negative = LongCompletion(40);
  negative["pinned_prefix_tokens"] = -1;
  ExpectError(Post(*client_, "/v1/completions", negative), 400, "pinned_prefix_tokens");
}

TEST_F(ServerShiftTest, ShiftedCompletionSaysSoWholeAndStreamed) {
  json request = LongCompletion(300);
  request["context_overflow"] = "shift";
  Reply whole = Post(*client_, "/v1/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const json& choice = whole.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["truncated"], true);
  ASSERT_TRUE(choice["dropped_tokens"].is_number_integer()) << whole.text;
  const int dropped = choice["dropped_tokens"];
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(dropped % 16, 0);  // whole blocks
  EXPECT_EQ(whole.body["usage"]["dropped_tokens"], dropped);
  EXPECT_EQ(whole.body["usage"]["completion_tokens"], 300);

  request["stream"] = true;
  auto result = client_->Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  SseStream stream = ParseSse(result->body);
  EXPECT_TRUE(stream.done);
  std::string finish;
  EXPECT_EQ(StreamText(stream, 0, &finish), choice["text"]);
  EXPECT_EQ(finish, "length");
  bool said = false;
  for (const json& event : stream.events) {
    for (const json& c : event["choices"]) {
      if (c.contains("truncated")) {
        said = true;
        EXPECT_FALSE(c["finish_reason"].is_null()) << "only the finishing chunk says it";
        EXPECT_EQ(c["dropped_tokens"], dropped);
      }
    }
  }
  EXPECT_TRUE(said) << result->body.substr(result->body.size() - 400);

  // A prompt longer than the context keeps its head and end instead of a 400.
  std::vector<int32_t> ids = Tokens(*client_, "Once upon a time");
  while (ids.size() < 300) ids.push_back(static_cast<int32_t>(100 + ids.size() % 300));
  json long_prompt = {{"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}};
  ExpectError(Post(*client_, "/v1/completions", long_prompt), 400, "prompt");
  long_prompt["context_overflow"] = "shift";
  Reply cut = Post(*client_, "/v1/completions", long_prompt);
  ASSERT_EQ(cut.status, 200) << cut.text;
  EXPECT_EQ(cut.body["usage"]["prompt_tokens"], 300);
  EXPECT_EQ(cut.body["choices"][0]["truncated"], true);
  EXPECT_EQ(cut.body["usage"]["completion_tokens"], 8);

  const std::string metrics = Get(*client_, "/metrics").text;
  EXPECT_GE(Metric(metrics, "kvserve:context_shift_requests_total"), 3) << metrics;
  EXPECT_GE(Metric(metrics, "kvserve:context_shift_dropped_tokens_total"), 2 * dropped);
  EXPECT_GE(Metric(metrics, "kvserve:context_shifts_total"), 3);
  EXPECT_GT(Metric(metrics, "kvserve:context_shift_recomputed_tokens_total"), 0);
}

// Chat: by default the shift keeps the rendered system message (what it shares with the prompt),
// the same answer as pinning that many tokens by hand and not the answer with no pin.
TEST_F(ServerShiftTest, ChatPinsTheSystemMessage) {
  const std::string system =
      "You are a storyteller. Tell long stories about Lily, her dog Max, the big park, the red "
      "ball and the kind old man who lives by the river.";
  const std::string user = "Tell me a story.";
  json request = {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                            {{"role", "user"}, {"content", user}}})},
                  {"max_tokens", 200},
                  {"temperature", 0},
                  {"ignore_eos", true},
                  {"context_overflow", "shift"}};
  Reply by_default = Post(*client_, "/v1/chat/completions", request);
  ASSERT_EQ(by_default.status, 200) << by_default.text;
  EXPECT_EQ(by_default.body["choices"][0]["truncated"], true) << by_default.text;
  // The plain template: "system: ...\nuser: ...\nassistant:".
  const std::vector<int32_t> sys = Tokens(*client_, "system: " + system + "\n");
  const std::vector<int32_t> all =
      Tokens(*client_, "system: " + system + "\nuser: " + user + "\nassistant:");
  const int pinned = static_cast<int>(
      std::mismatch(sys.begin(), sys.end(), all.begin(), all.end()).first - sys.begin());
  ASSERT_GT(pinned, 32);
  request["pinned_prefix_tokens"] = pinned;
  Reply by_hand = Post(*client_, "/v1/chat/completions", request);
  ASSERT_EQ(by_hand.status, 200) << by_hand.text;
  EXPECT_EQ(by_hand.body["choices"][0]["message"]["content"],
            by_default.body["choices"][0]["message"]["content"]);
  request["pinned_prefix_tokens"] = 0;
  Reply unpinned = Post(*client_, "/v1/chat/completions", request);
  ASSERT_EQ(unpinned.status, 200) << unpinned.text;
  EXPECT_NE(unpinned.body["choices"][0]["message"]["content"],
            by_default.body["choices"][0]["message"]["content"]);
}

// --context-overflow shift as the server's policy: requests shift unless they say "error".
TEST(ServerShiftFlagTest, ServerPolicyShiftsAndRequestsMayRefuse) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--context-overflow", "shift", "--sink-tokens", "8"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  Reply shifted = Post(*client, "/v1/completions", LongCompletion(300));
  ASSERT_EQ(shifted.status, 200) << shifted.text;
  EXPECT_EQ(shifted.body["choices"][0]["truncated"], true);
  json refuse = LongCompletion(300);
  refuse["context_overflow"] = "error";
  ExpectError(Post(*client, "/v1/completions", refuse), 400, "max_tokens");
  EXPECT_EQ(server->Terminate(), 0) << server->log();

  std::string out, err;
  EXPECT_EQ(RunKvserve("serve -m '" + ModelPath("stories260K.gguf") +
                           "' --port 0 --context-overflow sometimes",
                       &out, &err),
            2);
  EXPECT_NE(err.find("'sometimes' is not one of error, shift"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
