// The t5 architecture (src/model/t5_model.h) against llama.cpp: its relative position buckets
// (tests/data/llama-reference/t5-buckets.json, from llama.cpp's own function), and `kvserve synth
// --preset t5-tiny` / `t5-tiny-v1` files (gated GELU with a separate output; ReLU with a tied
// one) made again here and checked byte for byte against the files llama.cpp read: the encoder's
// output, the decoder's logits over a batched prefix, and teacher-forced greedy steps one token at
// a time with the cache. The model is run by hand (T5Run: the cache laid out by the test); two
// inputs encoded and decoded together give each one's bits alone, and so do any block layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/t5_position_bias.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/t5_run.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

std::string ReferenceDir() {
  return std::string(KVSERVE_SOURCE_DIR) + "/tests/data/llama-reference/";
}

TEST(T5PositionBucket, EqualsLlamaCppForEveryDistance) {
  const std::string json = testing::ReadTextFile(ReferenceDir() + "t5-buckets.json");
  for (int n_buckets : {32, 64}) {
    for (bool bidirectional : {true, false}) {
      const std::string key =
          "buckets_" + std::to_string(n_buckets) + (bidirectional ? "_bi" : "_uni");
      const std::vector<int32_t> want = testing::JsonIntArray(json, key);
      ASSERT_EQ(want.size(), 1201u) << key;
      for (int i = 0; i < 1201; ++i) {
        const int d = i - 600;
        ASSERT_EQ(RelativePositionBucket(d, 0, n_buckets, bidirectional), want[i])
            << key << " distance " << d;
        // Only the distance counts.
        ASSERT_EQ(RelativePositionBucket(d + 37, 37, n_buckets, bidirectional), want[i]);
      }
    }
  }
}

struct T5Case {
  const char* name;
  const char* preset;
  GgmlType type;
  const char* sha256;  // of the file llama.cpp read (tests/data/llama-reference/README.md)
  double tolerance;    // of a logit row's largest |logit| (RelativeRowError)
};

// Measured (of the row's largest |logit| or |output|): t5-tiny F32 1.4e-5 on the encoder, 4.5e-6
// on the logits (GGML's f16-table GELU; the Python float64 forward of make_t5_reference's README
// is 1.9e-4 from llama.cpp there); Q8_0 5.1e-3 on the greedy steps (an 8-bit activation rounded
// the other way); t5-tiny-v1 (ReLU) 3.0e-7 and 2.1e-7: float summation order alone.
const T5Case kCases[] = {
    {"t5-tiny-f32", "t5-tiny", GgmlType::kF32,
     "e030a8cf1a7897384b63fe4ae72ae723118d73de0b163f3af5cb3232f574bc31", 1e-4},
    {"t5-tiny-q8_0", "t5-tiny", GgmlType::kQ8_0,
     "825ef64f30ed77bc847c64db673b970b0603dac37034707085cb9d1ac144f40d", 2e-2},
    {"t5-tiny-v1-f32", "t5-tiny-v1", GgmlType::kF32,
     "05822e00d51fcbdcb7785428f04f6be2a041616071c7f6373a769404de6c1cc4", 2e-6},
    {"t5-tiny-v1-q8_0", "t5-tiny-v1", GgmlType::kQ8_0,
     "f48af2ca5be777446d6a248c9520d6b6968c8b584b634fa61439a7c356ef6b10", 2e-6},
};

struct T5Reference {
  std::vector<int32_t> encoder_tokens, decoder_prompt, greedy;
  std::vector<float> encoded, prompt_logits, gen_logits;
  int n_vocab = 0;
};

T5Reference LoadReference(const std::string& name) {
  const std::string base = ReferenceDir() + name;
  const std::string json = testing::ReadTextFile(base + ".json");
  T5Reference r;
  r.encoder_tokens = testing::JsonIntArray(json, "encoder_tokens");
  r.decoder_prompt = testing::JsonIntArray(json, "decoder_prompt_tokens");
  r.greedy = testing::JsonIntArray(json, "greedy_tokens");
  r.encoded = testing::ReadFloats(base + ".enc.f32");
  r.prompt_logits = testing::ReadFloats(base + ".logits.f32");
  r.gen_logits = testing::ReadFloats(base + ".gen.logits.f32");
  r.n_vocab = static_cast<int>(r.prompt_logits.size() / r.decoder_prompt.size());
  return r;
}

int32_t ArgmaxRow(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

std::span<const float> Row(const std::vector<float>& v, size_t row, size_t width) {
  return std::span<const float>(v).subspan(row * width, width);
}

class T5ReferenceTest : public ::testing::TestWithParam<T5Case> {
 protected:
  std::string Synthesize() const {
    return testing::SynthesizedModel(GetParam().preset, GetParam().name, GetParam().type);
  }
};

TEST_P(T5ReferenceTest, FileIsTheOneLlamaCppRead) {
  const std::string path = Synthesize();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(testing::FileSha256(path), GetParam().sha256)
      << "kvserve synth writes another file than the references were made from; remake them "
         "(tests/data/llama-reference/README.md)";
}

// The encoder's output, the batched decoder prefix and 16 greedy steps teacher-forced.
TEST_P(T5ReferenceTest, EncoderAndDecoderMatchLlamaCpp) {
  const T5Case& tc = GetParam();
  auto model = testing::LoadPathOrDie(Synthesize());
  ASSERT_NE(model, nullptr);
  const T5Reference ref = LoadReference(tc.name);
  const int n_embd = model->config().n_embd;
  ASSERT_EQ(model->config().n_vocab, ref.n_vocab);
  EXPECT_EQ(ref.decoder_prompt[0], model->decoder_start_token());
  testing::T5Run run(*model, 1);
  const std::vector<float> encoded = run.Encode({ref.encoder_tokens});
  ASSERT_EQ(encoded.size(), ref.encoded.size());
  const double enc_error = testing::MaxRelativeRowError(encoded, ref.encoded, n_embd);
  EXPECT_LE(enc_error, tc.tolerance);
  const std::vector<float> prompt = run.Decode({ref.decoder_prompt});
  const double prompt_error = testing::MaxRelativeRowError(prompt, ref.prompt_logits, ref.n_vocab);
  EXPECT_LE(prompt_error, tc.tolerance);
  std::vector<float> generated;
  int32_t next = ArgmaxRow(Row(prompt, ref.decoder_prompt.size() - 1, ref.n_vocab));
  for (size_t i = 0; i < ref.greedy.size(); ++i) {
    EXPECT_EQ(next, ref.greedy[i]) << "greedy step " << i;
    const std::vector<float> row = run.Decode({{ref.greedy[i]}});  // teacher-forced
    generated.insert(generated.end(), row.begin(), row.end());
    next = ArgmaxRow(row);
  }
  const double gen_error = testing::MaxRelativeRowError(generated, ref.gen_logits, ref.n_vocab);
  EXPECT_LE(gen_error, tc.tolerance);
  std::printf("%s: encoder %.2e, prefix %.2e, steps %.2e (of the row's largest)\n", tc.name,
              enc_error, prompt_error, gen_error);
}

INSTANTIATE_TEST_SUITE_P(Cases, T5ReferenceTest, ::testing::ValuesIn(kCases), [](const auto& info) {
  std::string name = info.param.name;
  std::replace(name.begin(), name.end(), '-', '_');
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
});

// Two inputs encoded in one batch and decoded together give each one's bits alone, whatever the
// blocks' layout.
TEST(T5Batch, TogetherEqualsAloneBitForBit) {
  auto model =
      testing::LoadPathOrDie(testing::SynthesizedModel("t5-tiny", "t5-tiny-f32", GgmlType::kF32));
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> a = {1, 307, 83, 450, 262, 119, 498, 37, 221};
  const std::vector<int32_t> b = {1, 376, 145, 290, 13, 402};
  const int32_t start = model->decoder_start_token();
  const std::vector<int32_t> da = {start, 12, 99, 7}, db = {start, 45};
  const int n_vocab = model->config().n_vocab;
  std::vector<float> alone_enc[2], alone_dec[2];
  for (int s = 0; s < 2; ++s) {
    testing::T5Run run(*model, 1);
    alone_enc[s] = run.Encode({s == 0 ? a : b});
    alone_dec[s] = run.Decode({s == 0 ? da : db});
  }
  testing::T5Run run(*model, 2, /*shuffle=*/5);
  const std::vector<float> enc = run.Encode({a, b});
  const std::vector<float> dec = run.Decode({da, db});
  const size_t n_embd = model->config().n_embd;
  EXPECT_TRUE(std::equal(alone_enc[0].begin(), alone_enc[0].end(), enc.begin()));
  EXPECT_TRUE(
      std::equal(alone_enc[1].begin(), alone_enc[1].end(), enc.begin() + a.size() * n_embd));
  EXPECT_TRUE(std::equal(alone_dec[0].begin(), alone_dec[0].end(), dec.begin()));
  EXPECT_TRUE(
      std::equal(alone_dec[1].begin(), alone_dec[1].end(), dec.begin() + da.size() * n_vocab));
}

}  // namespace
}  // namespace kvserve
