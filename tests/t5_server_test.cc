// A T5 file served by `kvserve serve` (a child process on loopback): /v1/completions encodes the
// prompt and decodes from the start token; the same prompt again reports its whole input as
// cached tokens and gives the same text; streaming gives the text of the whole answer; a stop
// string cuts it as on a decoder-only model; `decoder_prompt` forces the answer's start, and a
// decoder-only model refuses it.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "support/cli.h"
#include "support/paths.h"
#include "support/serve_process.h"
#include "support/synthetic_files.h"

namespace kvserve {
namespace {

using testing::json;

TEST(T5Server, CompletionsEncodeThePromptOnceAndStream) {
  const std::string model =
      testing::SynthesizedModel("t5-tiny-v1", "t5-tiny-v1-f32", GgmlType::kF32);
  ASSERT_FALSE(model.empty());
  auto server = testing::ServeProcess::Start({"-m", model});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  const json body = {{"prompt", "Once upon a time there was a little girl named Lily."},
                     {"max_tokens", 12},
                     {"temperature", 0}};
  const testing::Reply first = testing::Post(*client, "/v1/completions", body);
  ASSERT_EQ(first.status, 200) << first.text;
  const int prompt_tokens = first.body["usage"]["prompt_tokens"];
  EXPECT_GT(prompt_tokens, 5);
  EXPECT_EQ(first.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(first.body["usage"]["completion_tokens"], 12);
  const testing::Reply again = testing::Post(*client, "/v1/completions", body);
  ASSERT_EQ(again.status, 200) << again.text;
  EXPECT_EQ(again.body["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens);
  EXPECT_EQ(again.body["choices"][0]["text"], first.body["choices"][0]["text"]);

  json streamed = body;
  streamed["stream"] = true;
  const testing::Reply stream = testing::Post(*client, "/v1/completions", streamed);
  ASSERT_EQ(stream.status, 200) << stream.text;
  const testing::SseStream events = testing::ParseSse(stream.text);
  EXPECT_TRUE(events.done);
  EXPECT_EQ(testing::StreamText(events, 0), first.body["choices"][0]["text"].get<std::string>());

  // A stop string (an ASCII character of the answer past its first): the answer ends before its
  // first occurrence.
  const std::string text = first.body["choices"][0]["text"];
  size_t at = 1;
  while (at < text.size() && !std::isalnum(static_cast<unsigned char>(text[at]))) ++at;
  ASSERT_LT(at, text.size()) << text;
  const std::string stop = text.substr(at, 1);
  json stopped = body;
  stopped["stop"] = stop;
  const testing::Reply cut = testing::Post(*client, "/v1/completions", stopped);
  ASSERT_EQ(cut.status, 200) << cut.text;
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(cut.body["choices"][0]["text"], text.substr(0, text.find(stop)));
  // A decoder prompt: counted among the prompt tokens, and the answer goes on from it.
  json forced = body;
  forced["decoder_prompt"] = " Once";
  const testing::Reply started = testing::Post(*client, "/v1/completions", forced);
  ASSERT_EQ(started.status, 200) << started.text;
  EXPECT_GT(started.body["usage"]["prompt_tokens"].get<int>(), prompt_tokens);
  EXPECT_EQ(started.body["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens);
  client.reset();
  EXPECT_EQ(server->Terminate(), 0) << server->log();
}

// The commands that run a decoder alone (bench's single-stream tests, logits, chat) refuse an
// encoder-decoder model by name; run answers.
TEST(T5Cli, CommandsWithoutAnEncoderRefuseItByName) {
  const std::string model = testing::SynthesizedModel("t5-tiny", "t5-tiny-f32", GgmlType::kF32);
  ASSERT_FALSE(model.empty());
  const std::string out = testing::TempDir() + "/t5-logits.f32";
  for (const std::string& args : {"bench -m '" + model + "' -p 8 -n 4 -r 1",
                                  "logits -m '" + model + "' --tokens 1,2 --out '" + out + "'",
                                  "chat -m '" + model + "' -n 2 < /dev/null"}) {
    std::string printed, errors;
    EXPECT_NE(testing::RunKvserve(args, &printed, &errors), 0) << args;
    EXPECT_NE(errors.find("encoder-decoder"), std::string::npos) << args << ": " << errors;
  }
  std::string printed, errors;
  EXPECT_EQ(testing::RunKvserve("run -m '" + model + "' -p 'Once upon a time' -n 4 --ignore-eos",
                                &printed, &errors),
            0)
      << errors;
  EXPECT_NE(errors.find("decode: 4 tokens"), std::string::npos) << errors;
}

// A decoder-only model refuses a decoder prompt by name.
TEST(T5Server, ADecoderOnlyModelRefusesADecoderPrompt) {
  auto server = testing::ServeProcess::Start({});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  const testing::Reply reply = testing::Post(
      *client, "/v1/completions",
      json{{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"decoder_prompt", "There"}});
  EXPECT_EQ(reply.status, 400) << reply.text;
  EXPECT_NE(reply.text.find("decoder_prompt"), std::string::npos) << reply.text;
  client.reset();
  EXPECT_EQ(server->Terminate(), 0) << server->log();
}

}  // namespace
}  // namespace kvserve
