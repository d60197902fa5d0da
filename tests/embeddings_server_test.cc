// POST /v1/embeddings and `kvserve embed` on a t5encoder file (a child `kvserve serve` on
// loopback): one vector per input in order, of length 1 (euclidean), the same floats as `kvserve
// embed`; strings and token arrays mixed; base64 is the floats' bytes; refusals name their field
// (encoding_format, dimensions, input, too long an input); the server's --pooling none refuses the
// route; /v1/completions on a t5encoder names it; a decoder-only model's server refuses embeddings
// by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/paths.h"
#include "support/serve_process.h"
#include "support/synthetic_files.h"
#include "util/base64.h"

namespace kvserve {
namespace {

using testing::json;

std::string TinyEncoderFile() {
  return testing::SynthesizedModel("t5encoder-tiny", "t5encoder-tiny-f32", GgmlType::kF32);
}

std::vector<float> Floats(const json& v) { return v.get<std::vector<float>>(); }

TEST(EmbeddingsServer, VectorsPerInputEqualTheCliAndRefusalsNameTheirField) {
  const std::string model = TinyEncoderFile();
  ASSERT_FALSE(model.empty());
  auto server = testing::ServeProcess::Start({"-m", model});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  const testing::Reply one =
      testing::Post(*client, "/v1/embeddings", json{{"input", "Once upon a time"}});
  ASSERT_EQ(one.status, 200) << one.text;
  EXPECT_EQ(one.body["object"], "list");
  ASSERT_EQ(one.body["data"].size(), 1u);
  const std::vector<float> vector = Floats(one.body["data"][0]["embedding"]);
  ASSERT_EQ(vector.size(), 64u);
  double length = 0;
  for (float x : vector) length += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(length), 1.0, 1e-6);
  EXPECT_EQ(one.body["usage"]["prompt_tokens"], 5);  // <s> and 4 words
  EXPECT_EQ(one.body["usage"]["total_tokens"], 5);

  // The CLI computes the same floats.
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve(
                "embed -m '" + model + "' -t 1 -p 'Once upon a time' --output-format json",
                &printed, &errors),
            0)
      << errors;
  const json cli = json::parse(printed);
  EXPECT_EQ(Floats(cli["data"][0]["embedding"]), vector);

  // Strings and token arrays, in order; the tokens of the string give its vector.
  const testing::Reply many = testing::Post(
      *client, "/v1/embeddings",
      json{{"input", json::array({"Lily and Ben", json::array({1, 403, 407, 261, 378}), "x"})}});
  ASSERT_EQ(many.status, 200) << many.text;
  ASSERT_EQ(many.body["data"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(many.body["data"][i]["index"], i);
  EXPECT_EQ(Floats(many.body["data"][1]["embedding"]), vector);
  EXPECT_NE(Floats(many.body["data"][0]["embedding"]), vector);

  // base64: the float32 bytes of the same vector.
  const testing::Reply encoded =
      testing::Post(*client, "/v1/embeddings",
                    json{{"input", "Once upon a time"}, {"encoding_format", "base64"}});
  ASSERT_EQ(encoded.status, 200) << encoded.text;
  auto bytes = Base64Decode(encoded.body["data"][0]["embedding"].get<std::string>());
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  ASSERT_EQ(bytes->size(), 64u * sizeof(float));
  std::vector<float> decoded(64);
  std::memcpy(decoded.data(), bytes->data(), bytes->size());
  EXPECT_EQ(decoded, vector);

  // Refusals name their field; the server keeps answering.
  const std::pair<json, std::string> refused[] = {
      {{{"input", "a"}, {"encoding_format", "int8"}}, "encoding_format"},
      {{{"input", "a"}, {"dimensions", 32}}, "dimensions"},
      {{{"input", 5}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", json::array({"a", 7.5})}}, "input"},
      {{{"input", json::array({json::array({1, 9999})})}}, "input"},
      {{{"input", std::string(3000, 'a') + " b"}}, "input"},
      {{{"input", "a"}, {"embd_normalize", -5}}, "embd_normalize"},
      {json::object(), "input"}};
  for (const auto& [body, param] : refused) {
    const testing::Reply reply = testing::Post(*client, "/v1/embeddings", body);
    EXPECT_EQ(reply.status, 400) << body.dump() << ": " << reply.text;
    EXPECT_EQ(reply.body["error"]["param"], param) << body.dump() << ": " << reply.text;
  }
  const testing::Reply text =
      testing::Post(*client, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 4}});
  EXPECT_EQ(text.status, 400) << text.text;
  EXPECT_NE(text.text.find("t5encoder"), std::string::npos) << text.text;
  const testing::Reply map = testing::Get(*client, "/v1/kv-map");
  EXPECT_EQ(map.status, 404) << map.text;
  EXPECT_NE(map.text.find("no KV cache"), std::string::npos) << map.text;
  EXPECT_EQ(testing::Get(*client, "/v1/kv-map/stream").status, 404);
  EXPECT_EQ(testing::Get(*client, "/health").status, 200);
  const testing::Reply again =
      testing::Post(*client, "/v1/embeddings", json{{"input", "Once upon a time"}});
  ASSERT_EQ(again.status, 200) << again.text;
  EXPECT_EQ(Floats(again.body["data"][0]["embedding"]), vector);
  client.reset();
  EXPECT_EQ(server->Terminate(), 0) << server->log();
}

TEST(EmbeddingsServer, PoolingNoneAndDecoderOnlyModelsRefuseTheRoute) {
  auto none = testing::ServeProcess::Start({"-m", TinyEncoderFile(), "--pooling", "none"});
  ASSERT_NE(none, nullptr);
  auto client = none->Client();
  const testing::Reply per_token =
      testing::Post(*client, "/v1/embeddings", json{{"input", "Once upon a time"}});
  EXPECT_EQ(per_token.status, 400) << per_token.text;
  EXPECT_NE(per_token.text.find("--pooling"), std::string::npos) << per_token.text;
  client.reset();
  EXPECT_EQ(none->Terminate(), 0) << none->log();

  auto decoder = testing::ServeProcess::Start({});  // stories260K, a llama
  ASSERT_NE(decoder, nullptr);
  client = decoder->Client();
  const testing::Reply refused =
      testing::Post(*client, "/v1/embeddings", json{{"input", "Once upon a time"}});
  EXPECT_EQ(refused.status, 400) << refused.text;
  EXPECT_NE(refused.text.find("a llama model computes no embeddings"), std::string::npos)
      << refused.text;
  client.reset();
  EXPECT_EQ(decoder->Terminate(), 0) << decoder->log();
}

// `kvserve embed`: a line per input (split at newlines, or --embd-separator), each vector's
// floats; per-token vectors with --pooling none; refusals are flag errors (exit 2), a decoder-only
// model exit 1 naming it.
TEST(EmbedCli, LinesPerInputAndRefusals) {
  const std::string model = TinyEncoderFile();
  std::string printed, errors;
  const std::string text_file = testing::TempDir() + "/embed-inputs.txt";
  std::ofstream(text_file) << "Once upon\nLily\n";
  ASSERT_EQ(testing::RunKvserve("embed -m '" + model + "' -f '" + text_file + "' -t 1", &printed,
                                &errors),
            0)
      << errors;
  std::vector<std::string> lines;
  for (size_t at = 0; at < printed.size();) {
    const size_t end = printed.find('\n', at);
    lines.push_back(printed.substr(at, end - at));
    at = end + 1;
  }
  ASSERT_EQ(lines.size(), 2u) << printed;
  std::string split;
  ASSERT_EQ(
      testing::RunKvserve("embed -m '" + model + "' -p 'Once upon|Lily' --embd-separator '|' -t 1",
                          &split, &errors),
      0)
      << errors;
  EXPECT_EQ(split, printed);
  std::string per_token;
  ASSERT_EQ(testing::RunKvserve("embed -m '" + model + "' -p 'Once upon' --pooling none -t 1",
                                &per_token, &errors),
            0)
      << errors;
  EXPECT_EQ(std::count(per_token.begin(), per_token.end(), '\n'), 3) << per_token;
  EXPECT_EQ(testing::RunKvserve("embed -m '" + model + "' -p a --pooling rank", &printed, &errors),
            2);
  EXPECT_NE(errors.find("flag --pooling: unknown pooling 'rank'"), std::string::npos) << errors;
  EXPECT_EQ(
      testing::RunKvserve("embed -m '" + model + "' -p a --embd-normalize -4", &printed, &errors),
      2);
  EXPECT_EQ(testing::RunKvserve("embed -m '" + model + "'", &printed, &errors), 2);
  EXPECT_EQ(testing::RunKvserve("embed -m '" + testing::ModelPath("stories260K.gguf") + "' -p a",
                                &printed, &errors),
            1);
  EXPECT_NE(errors.find("computes no embeddings"), std::string::npos) << errors;
}

// Every command that generates text refuses a t5encoder by name, with an error exit (never a
// crash: an encoder-only model has no KV groups).
TEST(EmbedCli, TextCommandsRefuseAnEncoderOnlyModelByName) {
  const std::string model = TinyEncoderFile();
  const std::string out = testing::TempDir() + "/t5encoder-logits.f32";
  for (const std::string& args : {"logits -m '" + model + "' --tokens 1,2 --out '" + out + "'",
                                  "bench -m '" + model + "' -p 8 -n 4 -r 1",
                                  "bench -m '" + model + "' --cache-compare --lengths 4",
                                  "run -m '" + model + "' -p 'Once upon a time' -n 4",
                                  "chat -m '" + model + "' -n 2 < /dev/null"}) {
    std::string printed, errors;
    const int status = testing::RunKvserve(args, &printed, &errors);
    EXPECT_TRUE(status == 1 || status == 2) << args << ": exit " << status << ": " << errors;
    EXPECT_NE(errors.find("a t5encoder model has no decoder"), std::string::npos)
        << args << ": " << errors;
  }
}

}  // namespace
}  // namespace kvserve
