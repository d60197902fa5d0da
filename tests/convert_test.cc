// `kvserve convert` and GgufConverter: both shared models converted to every target type load and
// give logits close to the f32 model's, within a bound per model and type (see Bounds); f32 -> f32
// is bit-exact; the file layout (types per tensor, general.file_type, metadata) follows the rules.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "kernels/quantize.h"
#include "kv/kv_cache.h"
#include "model/gguf_converter.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/converted.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/test_backend.h"
#include "util/thread_pool.h"

namespace kvserve {
namespace {

// Bounds on max |logit - f32 logit| / max |f32 logit| over each row of the prompt's logits, per
// weight type. Where they come from:
// - f16 keeps 11 significant bits (relative rounding <= 2^-11 = 4.9e-4 per weight); bf16 keeps 8
//   (3.9e-3, 8x f16); q8_0 rounds each weight to amax/127 steps of its 32-block (and the q8_0
//   matmul also rounds the activations to q8_0); q4_0 to amax/8 steps, ~16x q8_0. The logit
//   error is the weight error summed over the layers, so it scales with these ratios.
// - Measured (AVX-512 kernels): stories260K f16 6.0e-4, bf16 3.5e-3, q8_0 1.4e-2, q4_0 0.23;
//   gpt2-tiny f16 8.2e-4, bf16 8.5e-3, q8_0 3.2e-2, q4_0 0.36. gpt2-tiny has random (std 0.15),
//   untrained weights whose logits amplify weight noise more, hence its larger bounds.
// - Each bound is ~2-2.5x the measurement. They are tight enough to catch mistakes: the next
//   coarser type's rounding breaks a finer type's bound (CoarserRoundingBreaksTheFinerBound) and
//   a Q4_0 model with its nibble halves swapped gives errors of 1.15 / 1.40, twice the q4_0 bound
//   (BrokenBlockLayoutFailsTheBound).
struct Bounds {
  double f16, bf16, q8_0, q4_0;
  double For(GgmlType type) const {
    switch (type) {
      case GgmlType::kF16:
        return f16;
      case GgmlType::kBF16:
        return bf16;
      case GgmlType::kQ8_0:
        return q8_0;
      case GgmlType::kQ4_0:
        return q4_0;
      default:
        return 0;
    }
  }
};

struct Case {
  const char* model;      // in ../shared/models
  const char* reference;  // ../shared/reference/<reference>.json holds prompt_tokens
  Bounds bounds;
};
const Case kCases[] = {
    {"stories260K.gguf",
     "stories260K-a",
     {.f16 = 1.5e-3, .bf16 = 1e-2, .q8_0 = 3.5e-2, .q4_0 = 0.5}},
    {"gpt2-tiny-f32.gguf", "gpt2-tiny-b", {.f16 = 2e-3, .bf16 = 2e-2, .q8_0 = 7e-2, .q4_0 = 0.75}},
};
constexpr GgmlType kLossyTypes[] = {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                                    GgmlType::kQ4_0};

std::vector<int32_t> PromptTokens(const std::string& reference) {
  std::ifstream in(testing::ReferencePath(reference + ".json"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const size_t key = json.find("\"prompt_tokens\"");
  EXPECT_NE(key, std::string::npos) << reference;
  const size_t open = json.find('[', key), close = json.find(']', key);
  std::vector<int32_t> tokens;
  std::stringstream list(json.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(list, item, ',');) tokens.push_back(std::stoi(item));
  return tokens;
}

std::string Converted(const std::string& model, GgmlType type) {
  return testing::ConvertToTemp(testing::ModelPath(model), QuantRecipe::Uniform(type),
                                model + "." + GgmlTypeName(type));
}

std::unique_ptr<Model> LoadOrDie(const std::string& path) {
  auto model = LoadModel(path, TestBackend());
  EXPECT_TRUE(model.ok()) << model.message();
  return model.ok() ? std::move(model).value() : nullptr;
}

// Relative logit error of `path` against the original f32 model of `c`.
double ErrorOf(const Case& c, const std::string& path) {
  auto reference = LoadOrDie(testing::ModelPath(c.model));
  auto model = LoadOrDie(path);
  if (!reference || !model) return INFINITY;
  const std::vector<int32_t> tokens = PromptTokens(c.reference);
  return testing::MaxRelativeRowError(testing::AllPositionLogits(*model, tokens),
                                      testing::AllPositionLogits(*reference, tokens),
                                      reference->config().n_vocab);
}

TEST(ConvertTest, F32ToF32IsBitExact) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.model);
    auto reference = LoadOrDie(testing::ModelPath(c.model));
    auto model = LoadOrDie(Converted(c.model, GgmlType::kF32));
    ASSERT_TRUE(reference && model);
    const std::vector<int32_t> tokens = PromptTokens(c.reference);
    const std::vector<float> a = testing::AllPositionLogits(*model, tokens),
                             b = testing::AllPositionLogits(*reference, tokens);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

TEST(ConvertTest, LogitsStayWithinTheBoundOfEachType) {
  for (const Case& c : kCases) {
    for (GgmlType type : kLossyTypes) {
      SCOPED_TRACE(std::string(c.model) + " " + GgmlTypeName(type));
      const double error = ErrorOf(c, Converted(c.model, type));
      std::printf("[ measured ] %-20s %-5s max relative logit error %.3e (bound %.1e)\n", c.model,
                  GgmlTypeName(type), error, c.bounds.For(type));
      EXPECT_LT(error, c.bounds.For(type));
      EXPECT_GT(error, 0.0) << "a lossy conversion gave identical logits";
    }
  }
}

// The bounds are tight enough to tell the types apart: the coarser type's rounding breaks the
// finer type's bound.
TEST(ConvertTest, CoarserRoundingBreaksTheFinerBound) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.model);
    EXPECT_GT(ErrorOf(c, Converted(c.model, GgmlType::kBF16)), c.bounds.f16);
    EXPECT_GT(ErrorOf(c, Converted(c.model, GgmlType::kQ4_0)), c.bounds.q8_0);
  }
}

// A broken Q4_0 block layout (nibble halves swapped: element j and j+16 exchanged) must fail
// even the loosest bound.
TEST(ConvertTest, BrokenBlockLayoutFailsTheBound) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.model);
    auto converted = GgufFile::Open(Converted(c.model, GgmlType::kQ4_0));
    ASSERT_TRUE(converted.ok());
    GgufWriter writer(converted->alignment());
    for (const auto& [key, value] : converted->metadata()) writer.CopyValue(key, value);
    for (const TensorInfo& t : converted->tensors()) {
      std::vector<uint8_t> data(t.data, t.data + t.n_bytes);
      if (t.type == GgmlType::kQ4_0) {
        for (size_t block = 0; block < data.size(); block += sizeof(BlockQ4_0)) {
          for (size_t j = 2; j < sizeof(BlockQ4_0); ++j) {
            data[block + j] = static_cast<uint8_t>((data[block + j] << 4) | (data[block + j] >> 4));
          }
        }
      }
      writer.AddTensor(t.name, t.type, t.dims, std::move(data));
    }
    const std::string path = testing::TempDir() + "/broken-" + c.model;
    ASSERT_TRUE(writer.WriteFile(path).ok());
    EXPECT_GT(ErrorOf(c, path), c.bounds.q4_0);
  }
}

TEST(ConvertTest, LayoutAndMetadataFollowTheRules) {
  const struct {
    GgmlType type;
    uint32_t file_type;
  } kTypes[] = {{GgmlType::kF32, 0},
                {GgmlType::kF16, 1},
                {GgmlType::kQ4_0, 2},
                {GgmlType::kQ8_0, 7},
                {GgmlType::kBF16, 32}};
  for (const Case& c : kCases) {
    auto source = GgufFile::Open(testing::ModelPath(c.model));
    ASSERT_TRUE(source.ok());
    for (const auto& t : kTypes) {
      SCOPED_TRACE(std::string(c.model) + " " + GgmlTypeName(t.type));
      auto out = GgufFile::Open(Converted(c.model, t.type));
      ASSERT_TRUE(out.ok()) << out.message();
      EXPECT_EQ(*out->GetUint("general.file_type"), t.file_type);
      const bool quantized = t.type == GgmlType::kQ8_0 || t.type == GgmlType::kQ4_0;
      if (quantized) {
        EXPECT_EQ(*out->GetUint("general.quantization_version"), 2u);
      }
      // Every other key is copied unchanged.
      for (const auto& [key, value] : source->metadata()) {
        if (key == "general.file_type" || (quantized && key == "general.quantization_version")) {
          continue;
        }
        const GgufValue* copy = out->Find(key);
        ASSERT_NE(copy, nullptr) << key;
        EXPECT_EQ(copy->type, value.type) << key;
        EXPECT_EQ(copy->u, value.u) << key;
        EXPECT_EQ(copy->str, value.str) << key;
        EXPECT_EQ(copy->array_size, value.array_size) << key;
      }
      ASSERT_EQ(out->tensors().size(), source->tensors().size());
      for (const TensorInfo& in : source->tensors()) {
        const TensorInfo* converted = out->FindTensor(in.name);
        ASSERT_NE(converted, nullptr) << in.name;
        EXPECT_EQ(converted->dims, in.dims) << in.name;
        GgmlType expected = t.type;
        if (in.dims.size() == 1) {
          expected = GgmlType::kF32;
        } else if (in.name == "position_embd.weight") {
          // Learned positions stay F32 for every target type, as llama-quantize (3f545becc)
          // keeps them: its F16, Q4_0, Q8_0 and BF16 of this file store position_embd in F32.
          expected = GgmlType::kF32;
        } else if (quantized && in.dims[0] % 32 != 0) {
          expected = GgmlType::kF16;  // stories260K's ffn_down rows are 172 long
        }
        EXPECT_EQ(converted->type, expected) << in.name;
      }
    }
  }
}

TEST(ConvertTest, QuantizedToOtherTypesDecodesTheSource) {
  // q8_0 -> f32 is the dequantized q8_0 model: same logits as the q8_0 model up to f32 rounding
  // (matmul on decoded values instead of the q8_0 kernels), and q8_0 -> q8_0 copies bytes.
  const Case& c = kCases[0];
  const std::string q8 = Converted(c.model, GgmlType::kQ8_0);
  auto q8_file = GgufFile::Open(q8);
  ASSERT_TRUE(q8_file.ok());
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    auto converter = GgufConverter::Create(*q8_file, type);
    ASSERT_TRUE(converter.ok());
    const std::string path = testing::TempDir() + "/requantized." + GgmlTypeName(type) + ".gguf";
    ASSERT_TRUE(converter->WriteFile(path).ok());
    auto again = GgufFile::Open(path);
    ASSERT_TRUE(again.ok()) << again.message();
    for (const TensorInfo& t : q8_file->tensors()) {
      const TensorInfo* u = again->FindTensor(t.name);
      ASSERT_NE(u, nullptr);
      if (type == GgmlType::kQ8_0) {
        ASSERT_EQ(u->n_bytes, t.n_bytes);
        EXPECT_EQ(std::memcmp(u->data, t.data, t.n_bytes), 0) << t.name;
      } else if (t.type == GgmlType::kQ8_0) {
        std::vector<float> decoded(t.n_elements);
        DequantizeRow(t.type, t.data, static_cast<int64_t>(t.n_elements), decoded.data());
        EXPECT_EQ(std::memcmp(u->data, decoded.data(), u->n_bytes), 0) << t.name;
      }
    }
  }
}

TEST(ConvertTest, RefusesUnsupportedTypes) {
  auto source = GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(source.ok());
  // Q8_K is a GGML type, but an activation format: never a weight.
  auto q8_k = GgufConverter::Create(*source, GgmlType::kQ8_K);
  ASSERT_FALSE(q8_k.ok());
  EXPECT_NE(q8_k.message().find("cannot convert to type Q8_K"), std::string::npos);

  GgufWriter writer;
  writer.AddTensor("blk.0.ffn_up.weight", GgmlType::kQ8_K, {256, 2}, std::vector<uint8_t>(584));
  const std::vector<uint8_t> bytes = writer.Serialize();
  auto k_quant = GgufFile::Parse(bytes.data(), bytes.size(), "k.gguf");
  ASSERT_TRUE(k_quant.ok()) << k_quant.message();
  auto refused = GgufConverter::Create(*k_quant, GgmlType::kF16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("tensor 'blk.0.ffn_up.weight' has type Q8_K"), std::string::npos)
      << refused.message();
}

TEST(ConvertTest, StreamsInChunks) {
  // A tensor larger than one chunk converts the same as element by element.
  const int64_t n = GgufConverter::kChunkElements * 2 + 64;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = std::sin(0.001f * static_cast<float>(i)) * 3.0f;
  GgufWriter writer;
  std::vector<uint8_t> bytes(n * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  writer.AddTensor("big.weight", GgmlType::kF32, {64, n / 64}, std::move(bytes));
  const std::vector<uint8_t> image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "big.gguf");
  ASSERT_TRUE(file.ok());
  auto converter = GgufConverter::Create(*file, GgmlType::kQ4_0);
  ASSERT_TRUE(converter.ok());
  GgufWriter out;
  converter->AddTo(out);
  const std::vector<uint8_t> converted = out.Serialize();
  auto result = GgufFile::Parse(converted.data(), converted.size(), "out.gguf");
  ASSERT_TRUE(result.ok()) << result.message();
  std::vector<uint8_t> expected(RowBytes(GgmlType::kQ4_0, n));
  QuantizeRow(GgmlType::kQ4_0, values.data(), n, expected.data());
  const TensorInfo* big = result->FindTensor("big.weight");
  ASSERT_EQ(big->n_bytes, expected.size());
  EXPECT_EQ(std::memcmp(big->data, expected.data(), expected.size()), 0);
}

TEST(ConvertTest, RefusesNonFiniteWeights) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> values(64, 0.5f);
    values[37] = bad;
    GgufWriter writer;
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {32, 2}, std::move(bytes));
    const std::vector<uint8_t> image = writer.Serialize();
    auto file = GgufFile::Parse(image.data(), image.size(), "bad.gguf");
    ASSERT_TRUE(file.ok());
    auto converter = GgufConverter::Create(*file, GgmlType::kQ8_0);
    ASSERT_TRUE(converter.ok());
    const Status written = converter->WriteFile(testing::TempDir() + "/nonfinite.gguf");
    ASSERT_FALSE(written.ok());
    EXPECT_NE(written.message().find("blk.0.attn_q.weight"), std::string::npos)
        << written.message();
    EXPECT_NE(written.message().find("element 37"), std::string::npos) << written.message();
  }
  // The encoders themselves stay defined on such input (no float-to-int overflow).
  std::vector<float> block(32, 1.0f);
  block[3] = NAN;
  block[4] = INFINITY;
  std::vector<uint8_t> q8(RowBytes(GgmlType::kQ8_0, 32)), q4(RowBytes(GgmlType::kQ4_0, 32));
  QuantizeRow(GgmlType::kQ8_0, block.data(), 32, q8.data());
  QuantizeRow(GgmlType::kQ4_0, block.data(), 32, q4.data());
  std::vector<float> tiny(32, 1e-40f);  // denormal block: the inverse scale overflows
  QuantizeRow(GgmlType::kQ8_0, tiny.data(), 32, q8.data());
  QuantizeRow(GgmlType::kQ4_0, tiny.data(), 32, q4.data());
}

TEST(ConvertCommandTest, ConvertsAndReportsFallbacks) {
  const std::string out_path = testing::TempDir() + "/cli-q8_0.gguf";
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("convert -m " + testing::ModelPath("stories260K.gguf") + " -o " +
                                    out_path + " --type q8_0",
                                &out, &err),
            0)
      << err;
  // One stderr line per layer's ffn_down (row length 172), naming tensor, length and fallback.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 5) << err;
  EXPECT_NE(err.find("tensor 'blk.4.ffn_down.weight' [172, 64]: row length 172 is not a multiple "
                     "of the Q8_0 block size 32; stored as F16"),
            std::string::npos)
      << err;
  EXPECT_NE(out.find("48 tensors"), std::string::npos) << out;
  // Same bytes as the library conversion.
  std::ifstream a(out_path, std::ios::binary),
      b(Converted("stories260K.gguf", GgmlType::kQ8_0), std::ios::binary);
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_TRUE(sa.str() == sb.str());
}

TEST(ConvertCommandTest, ErrorsAreOneLineAndNonZero) {
  const std::string model = testing::ModelPath("stories260K.gguf");
  const std::string out_path = testing::TempDir() + "/never.gguf";
  const struct {
    std::string args;
    std::string message;
  } kCasesCli[] = {
      {"convert -m " + testing::TempDir() + "/missing.gguf -o " + out_path + " --type f16",
       "cannot open '" + testing::TempDir() + "/missing.gguf'"},
      {"convert -m " + model + " -o " + out_path + " --type q8_k", "unknown --type 'q8_k'"},
      {"convert -m " + model + " -o " + out_path + " --type iq2_xxs", "unknown --type 'iq2_xxs'"},
      {"convert -m " + model + " -o " + testing::TempDir() + "/no/such/dir.gguf --type f16",
       "cannot create"},
  };
  for (const auto& c : kCasesCli) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_NE(testing::RunKvserve(c.args, &out, &err), 0);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("kvserve convert: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
  std::string out, err;
  EXPECT_NE(testing::RunKvserve("convert -m " + model, &out, &err), 0);
  EXPECT_NE(err.find("usage: kvserve convert"), std::string::npos) << err;
  EXPECT_FALSE(std::ifstream(out_path).good());
}

}  // namespace
}  // namespace kvserve
