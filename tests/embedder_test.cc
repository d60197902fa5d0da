// engine/embedder.h: pooling (none, mean, cls, last) from the token states, llama.cpp's
// normalizations, the file's pooling key, and the errors at its boundary (each names the input
// and the value); a decoder-only model is refused by name.
#include "engine/embedder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "support/reference_runs.h"
#include "support/synthetic_files.h"

namespace kvserve {
namespace {

std::unique_ptr<Model> TinyEncoder() {
  return testing::LoadPathOrDie(
      testing::SynthesizedModel("t5encoder-tiny", "t5encoder-tiny-f32", GgmlType::kF32));
}

TEST(Normalize, EachNormAsLlamaCppDefinesIt) {
  const std::vector<float> v = {3, -4, 0, 1.5f};
  std::vector<float> e = v;
  NormalizeEmbedding(e, 2);
  double length = 0;
  for (float x : e) length += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(length), 1.0, 1e-6);
  EXPECT_FLOAT_EQ(e[0], static_cast<float>(3 / std::sqrt(27.25)));
  std::vector<float> taxicab = v;
  NormalizeEmbedding(taxicab, 1);
  EXPECT_FLOAT_EQ(taxicab[1], -4.0f / 8.5f);
  std::vector<float> max_abs = v;
  NormalizeEmbedding(max_abs, 0);
  EXPECT_FLOAT_EQ(max_abs[1], -32760.0f);
  EXPECT_FLOAT_EQ(max_abs[0], 3.0f * 32760.0f / 4.0f);
  std::vector<float> p3 = v;
  NormalizeEmbedding(p3, 3);
  EXPECT_FLOAT_EQ(p3[0], static_cast<float>(3 / std::cbrt(27 + 64 + 3.375)));
  std::vector<float> none = v;
  NormalizeEmbedding(none, -1);
  EXPECT_EQ(none, v);
  std::vector<float> zero = {0, 0, 0};
  for (int norm : {0, 1, 2, 5}) {
    NormalizeEmbedding(zero, norm);
    EXPECT_EQ(zero, std::vector<float>(3, 0.0f)) << norm;
  }
  EXPECT_TRUE(CheckNormalize(-1, "n").ok());
  const Status bad = CheckNormalize(-2, "flag --embd-normalize");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--embd-normalize = -2"), std::string::npos) << bad.message();
}

TEST(Pooling, NamesParseAndUnknownOnesAreRefusedByField) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    auto parsed = ParsePooling(PoolingName(p), "f");
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParsePooling("rank", "flag --pooling");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("flag --pooling: unknown pooling 'rank'"), std::string::npos);
}

// mean = the average of the token states (in double), cls = the first, last = the last; then the
// euclidean normalization when asked.
TEST(Pooling, PooledVectorsComeFromTheTokenStates) {
  auto model = TinyEncoder();
  ASSERT_NE(model, nullptr);
  auto file_pooling = FilePooling(*model);
  ASSERT_TRUE(file_pooling.ok());
  EXPECT_EQ(*file_pooling, Pooling::kMean);  // the file has no pooling_type
  const std::vector<std::vector<int32_t>> inputs = {{1, 403, 407, 261, 378}, {1, 317}};
  Embedder embedder(*model, 2, 512, 512);
  auto states = embedder.Run(inputs, {.pooling = Pooling::kNone, .normalize = -1});
  ASSERT_TRUE(states.ok()) << states.message();
  ASSERT_EQ(states->vectors.size(), 7u);
  const int dim = states->dim;
  auto mean = embedder.Run(inputs, {.pooling = Pooling::kMean, .normalize = -1});
  auto cls = embedder.Run(inputs, {.pooling = Pooling::kCls, .normalize = -1});
  auto last = embedder.Run(inputs, {.pooling = Pooling::kLast, .normalize = -1});
  auto unit = embedder.Run(inputs, {.pooling = Pooling::kMean, .normalize = 2});
  ASSERT_TRUE(mean.ok() && cls.ok() && last.ok() && unit.ok());
  ASSERT_EQ(mean->vectors.size(), 2u);
  const size_t first_row[] = {0, 5}, n_rows[] = {5, 2};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cls->vectors[i], states->vectors[first_row[i]]);
    EXPECT_EQ(last->vectors[i], states->vectors[first_row[i] + n_rows[i] - 1]);
    double length = 0;
    for (int d = 0; d < dim; ++d) {
      double sum = 0;
      for (size_t r = 0; r < n_rows[i]; ++r) sum += states->vectors[first_row[i] + r][d];
      EXPECT_EQ(mean->vectors[i][d], static_cast<float>(sum / n_rows[i])) << i << " " << d;
      length += static_cast<double>(unit->vectors[i][d]) * unit->vectors[i][d];
    }
    EXPECT_NEAR(std::sqrt(length), 1.0, 1e-6);
  }
  EXPECT_EQ(mean->total_tokens, 7);
}

TEST(Embedder, BadInputsAreErrorsNamingTheInput) {
  auto model = TinyEncoder();
  ASSERT_NE(model, nullptr);
  Embedder embedder(*model, 1, 8, 512);
  auto error_of = [&](std::vector<std::vector<int32_t>> inputs) {
    auto out = embedder.Run(inputs, {});
    return out.ok() ? std::string("ok") : out.message();
  };
  EXPECT_NE(error_of({}).find("input: no text"), std::string::npos);
  EXPECT_NE(error_of({{1, 2}, {}}).find("input[1] is empty"), std::string::npos);
  EXPECT_NE(error_of({{1, 512}}).find("input[0]: token id 512 is out of range"), std::string::npos);
  EXPECT_NE(error_of({{1, -1}}).find("token id -1"), std::string::npos);
  EXPECT_NE(error_of({{1, 2, 3, 4, 5, 6, 7, 8, 9}})
                .find("input[0] has 9 tokens, more than the "
                      "context's 8"),
            std::string::npos);
  auto normalize = embedder.Run({{{1, 2}}}, {.normalize = -3});
  EXPECT_FALSE(normalize.ok());
  EXPECT_EQ(error_of({{1, 2, 3, 4, 5, 6, 7, 8}}), "ok");  // and it still works
}

TEST(Embedder, DecoderOnlyModelIsRefusedByName) {
  auto model = testing::LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  Embedder embedder(*model, 1, 512, 512);
  const Status supported = embedder.Supported();
  ASSERT_FALSE(supported.ok());
  EXPECT_NE(supported.message().find("a llama model computes no embeddings"), std::string::npos)
      << supported.message();
  auto out = embedder.Run({{{1, 2}}}, {});
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace kvserve
