// MXFP4 (GGML type 39, gpt-oss's expert weights): the E8M0 scale for every byte, decoding of a
// hand-built block, and the encoder byte for byte against llama.cpp's quantize_row_mxfp4_ref on
// tricky blocks (zeros, ties, powers of two, a maximum just below one, tiny and denormal maxima
// whose exponent wraps, non-finite values, maxima near FLT_MAX, random values at many scales).
// The tiles, the x16 layout and the conversion are tested with the other types (kquant_test.cc,
// packed_blocks32_test.cc, kquant_model_test.cc, quant_recipe_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "kernels/ggml_blocks.h"
#include "kernels/quantize.h"
#include "model/gguf_converter.h"
#include "model/model.h"
#include "model/quant_recipe.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/test_backend.h"
#include "util/sha256.h"

namespace kvserve {
namespace {

TEST(Mxfp4Test, TypeTraits) {
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::kMXFP4), 39u);
  const auto traits = GetGgmlTypeTraits(39);
  ASSERT_TRUE(traits.has_value());
  EXPECT_STREQ(traits->name, "MXFP4");
  EXPECT_EQ(traits->block_elements, 32u);
  EXPECT_EQ(traits->block_bytes, 17u);
  EXPECT_TRUE(traits->supported);
  EXPECT_EQ(ParseGgmlType("mxfp4"), GgmlType::kMXFP4);
  EXPECT_EQ(ParseGgmlType("MXFP4"), GgmlType::kMXFP4);
  EXPECT_EQ(RowBytes(GgmlType::kMXFP4, 2880), 90u * 17u);  // a gpt-oss row
}

// 2^(e - 128) for every byte: GGML's GGML_E8M0_TO_FP32_HALF, denormals for e = 0 and 1, and a
// finite 2^127 for e = 255 (no NaN).
TEST(Mxfp4Test, E8M0HalfIsTwoToTheEMinus128ForEveryByte) {
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(E8M0Half(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
  }
  EXPECT_EQ(std::bit_cast<uint32_t>(E8M0Half(0)), 0x00200000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(E8M0Half(1)), 0x00400000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(E8M0Half(2)), 0x00800000u);  // the smallest normal
  EXPECT_EQ(E8M0Half(128), 1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(E8M0Half(255)), 0x7f000000u);
  EXPECT_TRUE(std::isfinite(E8M0Half(255)));
}

TEST(Mxfp4Test, DecodesTheDoubledTableTimesTheHalfScale) {
  BlockMxfp4 b{};
  b.e = 130;  // 2^(130 - 128) = 4
  for (int j = 0; j < 16; ++j) b.quants[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<uint8_t> bytes(sizeof(b));
  std::memcpy(bytes.data(), &b, sizeof(b));
  std::vector<float> x(32);
  DequantizeRow(GgmlType::kMXFP4, bytes.data(), 32, x.data());
  // E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times the full scale 2^(130 - 127) = 8.
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 8.0f * e2m1[j]) << j;
    EXPECT_EQ(x[j + 16], 8.0f * e2m1[15 - j]) << j;
  }
}

// The blocks of the encoder test: 16 blocks of 32 floats.
constexpr int kTrickyBlocks = 16;
std::vector<float> TrickyInputs() {
  std::vector<float> x(32 * kTrickyBlocks, 0.0f);
  auto block = [&](int b) { return x.data() + 32 * b; };
  // 0: zeros of both signs.
  for (int j = 0; j < 32; j += 2) block(0)[j] = -0.0f;
  // 1: max 6.5 (e = 127, d = 0.5): every table value, every midpoint (ties), both signs.
  const float mid[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.5f};
  const float exact[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int j = 0; j < 8; ++j) {
    block(1)[j] = mid[j];
    block(1)[8 + j] = -mid[j];
    block(1)[16 + j] = exact[j];
    block(1)[24 + j] = -exact[j];
  }
  // 2: max exactly 8 = 2^3 (e = 128, d = 1): -4 .. 3.75 in steps of 1/4, with 8, -7, 7, 5.
  for (int j = 0; j < 32; ++j) block(2)[j] = -4.0f + 0.25f * static_cast<float>(j);
  block(2)[0] = 8.0f;
  block(2)[1] = -7.0f;
  block(2)[2] = 7.0f;
  block(2)[3] = 5.0f;
  // 3: max just below a power of two, nextafter(1024, 0): log2f rounds it to 10.
  for (int j = 0; j < 32; ++j) block(3)[j] = 31.0f * static_cast<float>(j) - 500.0f;
  block(3)[7] = std::nextafter(1024.0f, 0.0f);
  block(3)[8] = -std::nextafter(1024.0f, 0.0f);
  // 4 .. 7: tiny maxima: 2^-130 (e wraps to 251), 2^-125 (e = 0), 2^-124 (e = 1), and a
  // denormal 1e-40 (e wraps to 248); each with smaller values, denormals among them.
  const float tiny_max[4] = {std::ldexp(1.0f, -130), std::ldexp(1.0f, -125), std::ldexp(1.0f, -124),
                             1e-40f};
  for (int t = 0; t < 4; ++t) {
    for (int j = 0; j < 32; ++j) {
      block(4 + t)[j] =
          tiny_max[t] * static_cast<float>(j % 17) / 16.0f * (j % 3 == 0 ? -1.0f : 1.0f);
    }
  }
  // 8: an infinity and a NaN among finite values (e = 0).
  for (int j = 0; j < 32; ++j) block(8)[j] = 0.125f * static_cast<float>(j) - 2.0f;
  block(8)[5] = std::numeric_limits<float>::infinity();
  block(8)[6] = std::numeric_limits<float>::quiet_NaN();
  // 9: NaNs and finite values below 1 (e = 124).
  for (int j = 0; j < 32; ++j) block(9)[j] = static_cast<float>(j) / 31.0f;
  block(9)[0] = std::numeric_limits<float>::quiet_NaN();
  block(9)[31] = -std::numeric_limits<float>::quiet_NaN();
  // 10: near FLT_MAX (e = 252, the largest a finite block gets).
  for (int j = 0; j < 32; ++j) block(10)[j] = 3.0e38f * (static_cast<float>(j - 15) / 16.0f);
  // 11 .. 15: pseudo-random values (an LCG's integers, exact in float) at scales 2^-20 .. 2^20.
  uint32_t state = 12345u;
  for (int b = 11; b < kTrickyBlocks; ++b) {
    for (int j = 0; j < 32; ++j) {
      state = state * 1664525u + 1013904223u;
      const int32_t v = static_cast<int32_t>(state) >> 8;  // [-2^23, 2^23)
      block(b)[j] = std::ldexp(static_cast<float>(v), -23 + 10 * (b - 13));
    }
  }
  return x;
}

// llama.cpp's quantize_row_mxfp4_ref (commit 3f545becc, libggml-base built with GCC 12 on x86-64,
// glibc 2.36's log2f) on TrickyInputs(), one block of 17 bytes (e, then 16 nibble bytes) per
// string; a throwaway program outside the repository called it on the same floats.
constexpr const char* kLlamaCppBytes[kTrickyBlocks] = {
    "0000000000000000000000000000000000",  // 0: e = 0
    "7f00112233445566770099aabbccddeeff",  // 1: e = 127; ties go to the smaller magnitude
    "80060d05141b1b1a2a2a2a293939393040",  // 2: e = 128
    "870c0c0b1b1b1b1a262e2a293939393940",  // 3: e = 135, not the exact floor's 134
    "fb00000000000000000000000000000000",  // 4: e = 251 (-5 wrapped)
    "006000011912a22b33b44c44c55d55d55e",  // 5: e = 0
    "016000011912a22b33b44c44c55d55d55e",  // 6: e = 1
    "f800000000000000000000000000000000",  // 7: e = 248 (-8 wrapped)
    "0000000000000000000000000000000000",  // 8: e = 0 (infinite max)
    "7c60616162727373747474757575757606",  // 9: e = 124
    "fc1f2f3f4f4e5e5e6e6d6d6c7c7b7a7970",  // 10: e = 252
    "6871917faf0bf4777f6f7df14e39c26e07",  // 11: e = 104
    "7277e67fe9f0ee765779ffffcf7fa5ea4e",  // 12: e = 114
    "7cdfe7f7bdfdb574d7dc3efff647fccd37",  // 13: e = 124
    "86765efed70506fc177e3ef3be0d6f75ab",  // 14: e = 134
    "904bf5fe7fc74749fefff77777f777fa47",  // 15: e = 144
};

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", p[i]);
    s += buf;
  }
  return s;
}

TEST(Mxfp4Test, QuantizesAsLlamaCppByteForByte) {
  const std::vector<float> x = TrickyInputs();
  std::vector<uint8_t> bytes(RowBytes(GgmlType::kMXFP4, static_cast<int64_t>(x.size())));
  QuantizeRow(GgmlType::kMXFP4, x.data(), static_cast<int64_t>(x.size()), bytes.data());
  for (int b = 0; b < kTrickyBlocks; ++b) {
    EXPECT_EQ(Hex(bytes.data() + 17 * b, 17), kLlamaCppBytes[b]) << "block " << b;
  }
}

// The same rules derived by hand for block 1 (e = 127, d = 0.5, steps 0, 0.5, 1, 1.5, 2, 3, 4,
// 6): a midpoint takes the smaller magnitude of its two neighbours, on either side of zero, and
// -0.25 rounds to +0 (index 0), not to the table's second zero (index 8).
TEST(Mxfp4Test, TiesTakeTheSmallerMagnitude) {
  const std::vector<float> x = TrickyInputs();
  std::vector<uint8_t> bytes(17);
  QuantizeRow(GgmlType::kMXFP4, x.data() + 32, 32, bytes.data());
  EXPECT_EQ(bytes[0], 127);
  const int want_mid[8] = {0, 1, 2, 3, 4, 5, 6, 7};  // 0.25 -> 0, 0.75 -> 0.5, ..., 6.5 -> 6
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(bytes[1 + j] & 0x0f, want_mid[j]) << j;
    EXPECT_EQ(bytes[1 + 8 + j] & 0x0f, j == 0 ? 0 : 8 + want_mid[j]) << -j;
  }
  std::vector<float> y(32);
  DequantizeRow(GgmlType::kMXFP4, bytes.data(), 32, y.data());
  for (int j = 16; j < 32; ++j) EXPECT_EQ(y[j], x[32 + j]) << "table values round-trip, " << j;
}

// ../shared/models/arch/qwen3moe-f32.gguf (2 layers of 4 experts) through `convert --type
// mxfp4_moe`: every tensor gets llama-quantize's type, and the 16 quantized tensors (6 MXFP4
// expert tensors, 10 Q8_0 matrices) hash as in llama-quantize's MXFP4_MOE file of the same input
// (llama.cpp 3f545becc; the SHA-256 of their bytes in name order). The model loads, its experts
// run on MXFP4 tiles, and its logits stay near the F32 model's.
TEST(Mxfp4Test, Qwen3MoeConvertsAsLlamaQuantizeAndRuns) {
  const std::string f32_path = testing::ModelPath("arch/qwen3moe-f32.gguf");
  auto source = GgufFile::Open(f32_path);
  ASSERT_TRUE(source.ok()) << source.message();
  auto recipe = QuantRecipe::Find("mxfp4_moe");
  ASSERT_TRUE(recipe.ok()) << recipe.message();
  auto converter = GgufConverter::Create(*source, *recipe);
  ASSERT_TRUE(converter.ok()) << converter.message();
  const std::string path = testing::TempDir() + "/qwen3moe-mxfp4_moe.gguf";
  ASSERT_TRUE(converter->WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  std::vector<const TensorInfo*> quantized;
  for (const TensorInfo& t : file->tensors()) {
    const bool experts = t.name.ends_with("_exps.weight");
    const GgmlType want = t.dims.size() == 1 || t.name.ends_with("ffn_gate_inp.weight")
                              ? GgmlType::kF32
                          : experts ? GgmlType::kMXFP4
                                    : GgmlType::kQ8_0;
    EXPECT_EQ(t.type, want) << t.name;
    if (t.type != GgmlType::kF32) quantized.push_back(&t);
  }
  ASSERT_EQ(quantized.size(), 16u);
  std::sort(quantized.begin(), quantized.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
  Sha256 sha;
  for (const TensorInfo* t : quantized) sha.Update(t->data, t->n_bytes);
  EXPECT_EQ(Sha256::Hex(sha.Finish()),
            "c3361af761b13f5eff92db6de37f262cabc6797368380e3fd4aeff3078e7b4b2");

  auto reference = LoadModel(f32_path, TestBackend());
  ASSERT_TRUE(reference.ok()) << reference.message();
  auto model = LoadModel(path, TestBackend());
  ASSERT_TRUE(model.ok()) << model.message();
  const std::vector<int32_t> prompt = {1, 307, 83, 450, 262, 119, 498, 37, 221, 376, 145, 290};
  const std::vector<float> want = testing::AllPositionLogits(**reference, prompt);
  const std::vector<float> got = testing::AllPositionLogits(**model, prompt);
  ASSERT_EQ(got.size(), want.size());
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  const double error = testing::MaxRelativeRowError(got, want, (*model)->config().n_vocab);
  std::printf("[ measured ] qwen3moe mxfp4_moe: max relative logit error vs F32 %.3e\n", error);
  EXPECT_GT(error, 0.0);
  EXPECT_LT(error, 0.37);  // measured 0.244
}

}  // namespace
}  // namespace kvserve
