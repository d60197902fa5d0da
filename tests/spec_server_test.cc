// `kvserve serve --spec draft`: completions give the same tokens and logprobs as a server without
// speculation, usage reports drafted and accepted tokens (absent with `speculative: false`), and
// /metrics counts them. `serve` drafts by prompt lookup unless told `--spec none`.
#include "support/cli.h"
#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

json Completion(httplib::Client& client, json request) {
  const Reply reply = Post(client, "/v1/completions", request.dump());
  EXPECT_EQ(reply.status, 200) << reply.text;
  return reply.body;
}

TEST(SpecServerTest, SameCompletionsWithUsageAndMetrics) {
  signal(SIGPIPE, SIG_IGN);
  auto plain = ServeProcess::Start({"--spec", "none"});
  auto spec = ServeProcess::Start(
      {"--spec", "draft", "--model-draft", ModelPath("stories260K.gguf"), "--spec-max", "4"});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  auto plain_client = plain->Client();
  auto spec_client = spec->Client();
  const json request = {{"prompt", "Once upon a time"},
                        {"max_tokens", 40},
                        {"temperature", 0.8},
                        {"seed", 11},
                        {"logprobs", 2},
                        {"stop", {"Lily"}}};
  const json a = Completion(*plain_client, request);
  const json b = Completion(*spec_client, request);
  ASSERT_TRUE(a.contains("choices") && b.contains("choices"));
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]);
  EXPECT_EQ(a["choices"][0]["finish_reason"], b["choices"][0]["finish_reason"]);
  EXPECT_EQ(a["usage"]["completion_tokens"], b["usage"]["completion_tokens"]);
  EXPECT_FALSE(a["usage"].contains("drafted_tokens"));
  ASSERT_TRUE(b["usage"].contains("drafted_tokens")) << b.dump();
  EXPECT_GT(b["usage"]["drafted_tokens"].get<int>(), 0);
  EXPECT_LE(b["usage"]["accepted_tokens"].get<int>(), b["usage"]["drafted_tokens"].get<int>());

  json off = request;
  off["speculative"] = false;
  const json c = Completion(*spec_client, off);
  EXPECT_EQ(c["choices"][0]["text"], a["choices"][0]["text"]);
  EXPECT_FALSE(c["usage"].contains("drafted_tokens")) << c.dump();

  auto metrics = spec_client->Get("/metrics");
  ASSERT_TRUE(metrics);
  const std::string drafted = "kvserve:spec_decode_num_draft_tokens_total " +
                              std::to_string(b["usage"]["drafted_tokens"].get<int>());
  EXPECT_NE(metrics->body.find(drafted), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("kvserve:spec_decode_num_accepted_tokens_per_pos{position=\"0\"}"),
            std::string::npos);
}

// serve's default is prompt lookup (cli/engine_flags.h kServeSpec): a prompt that repeats itself
// gets drafts, and the same text as with `--spec none`.
TEST(SpecServerTest, PromptLookupIsTheServeDefault) {
  signal(SIGPIPE, SIG_IGN);
  auto plain = ServeProcess::Start({"--spec", "none"});
  auto by_default = ServeProcess::Start({});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(by_default, nullptr);
  auto plain_client = plain->Client();
  auto default_client = by_default->Client();
  const json request = {
      {"prompt", "Lily had a red ball. Lily had a red ball. Lily had a red ball. Lily had a"},
      {"max_tokens", 24},
      {"temperature", 0}};
  const json a = Completion(*plain_client, request);
  const json b = Completion(*default_client, request);
  ASSERT_TRUE(a.contains("choices") && b.contains("choices"));
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_FALSE(a["usage"].contains("drafted_tokens")) << a.dump();
  ASSERT_TRUE(b["usage"].contains("drafted_tokens")) << b.dump();
  EXPECT_GT(b["usage"]["drafted_tokens"].get<int>(), 0);
}

TEST(SpecServerTest, BadSpecFlagsStopTheServer) {
  std::string out, err;
  EXPECT_EQ(RunKvserve("serve -m " + ModelPath("stories260K.gguf") + " --port 0 --spec draft", &out,
                       &err),
            2);
  EXPECT_NE(err.find("--spec draft needs --model-draft"), std::string::npos) << err;
  EXPECT_NE(
      RunKvserve("serve -m " + ModelPath("stories260K.gguf") +
                     " --port 0 --spec draft --model-draft " + ModelPath("gpt2-tiny-f32.gguf"),
                 &out, &err),
      0);
  EXPECT_NE(err.find("draft model vocabulary"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
