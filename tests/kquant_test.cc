// The GGML weight types beyond Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K..Q6_K):
// - decoding of hand-built blocks with known scales and quants;
// - QuantizeRow/DequantizeRow round trips within error bounds, and the activation formats
//   (Q8_1, Q8_K) rounding as llama.cpp does;
// - each matmul tile against a double-precision reference from the dequantized weights and the
//   quantized activations; every table bit-equal to the scalar one for every batch size 1..17 and
//   odd output ranges, also through Matmul();
// - hostile input: NaN/Inf scales compute without a crash; a GGUF tensor whose bytes do not fit
//   its type is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ggml_blocks.h"
#include "kernels/quantize.h"
#include "support/kernel_tables.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace kvserve {
namespace {

constexpr GgmlType kNewTypes[] = {
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kMXFP4,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,   GgmlType::kQ6_K};

std::vector<const KernelTable*> AllTables() {
  std::vector<const KernelTable*> tables = {&ScalarKernels()};
  for (const KernelTable* t : testing::FastTables()) tables.push_back(t);
  return tables;
}

std::vector<float> RandomRow(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

template <typename Block>
std::vector<float> Decode(const Block& block, int n) {
  std::vector<uint8_t> bytes(sizeof(Block));
  std::memcpy(bytes.data(), &block, sizeof(Block));
  GgmlType type = GgmlType::kF32;
  for (GgmlType t : kNewTypes) {
    if (TraitsOf(t).block_bytes == sizeof(Block) &&
        static_cast<int>(TraitsOf(t).block_elements) == n) {
      type = t;
    }
  }
  std::vector<float> out(n);
  DequantizeRow(type, bytes.data(), n, out.data());
  return out;
}

TEST(KquantTest, TypeTraits) {
  struct Want {
    GgmlType type;
    const char* name;
    uint32_t elements, bytes;
  };
  const Want wants[] = {{GgmlType::kQ4_1, "Q4_1", 32, 20},   {GgmlType::kQ5_0, "Q5_0", 32, 22},
                        {GgmlType::kQ5_1, "Q5_1", 32, 24},   {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
                        {GgmlType::kQ2_K, "Q2_K", 256, 84},  {GgmlType::kQ3_K, "Q3_K", 256, 110},
                        {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
                        {GgmlType::kQ6_K, "Q6_K", 256, 210}};
  for (const Want& w : wants) {
    const auto traits = GetGgmlTypeTraits(static_cast<uint32_t>(w.type));
    ASSERT_TRUE(traits.has_value()) << w.name;
    EXPECT_STREQ(traits->name, w.name);
    EXPECT_EQ(traits->block_elements, w.elements) << w.name;
    EXPECT_EQ(traits->block_bytes, w.bytes) << w.name;
    EXPECT_TRUE(traits->supported) << w.name;
    EXPECT_EQ(ParseGgmlType(w.name), w.type);
  }
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::kIQ4_NL), 20u);
  EXPECT_FALSE(TraitsOf(GgmlType::kQ8_1).supported);  // activation formats only
  EXPECT_FALSE(TraitsOf(GgmlType::kQ8_K).supported);
}

TEST(KquantTest, DecodesQ4_1) {
  BlockQ4_1 b{};
  b.d = FloatToFp16(0.5f);
  b.m = FloatToFp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.quants[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto x = Decode(b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(x[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
}

TEST(KquantTest, DecodesQ5_0) {
  BlockQ5_0 b{};
  b.d = FloatToFp16(0.25f);
  const uint32_t qh = 0x80000001u;  // bit 4 of elements 0 and 31
  std::memcpy(b.qh, &qh, 4);
  std::memset(b.quants, 0x21, 16);  // low nibbles 1, high nibbles 2
  const auto x = Decode(b, 32);
  EXPECT_EQ(x[0], 0.25f);                                     // (1 | 16) - 16
  for (int j = 1; j < 16; ++j) EXPECT_EQ(x[j], -3.75f) << j;  // 1 - 16
  for (int j = 16; j < 31; ++j) EXPECT_EQ(x[j], -3.5f) << j;  // 2 - 16
  EXPECT_EQ(x[31], 0.5f);                                     // (2 | 16) - 16
}

TEST(KquantTest, DecodesQ5_1) {
  BlockQ5_1 b{};
  b.d = FloatToFp16(1.0f);
  b.m = FloatToFp16(0.5f);
  const uint32_t qh = 1u << 5;
  std::memcpy(b.qh, &qh, 4);
  std::memset(b.quants, 0x0f, 16);
  const auto x = Decode(b, 32);
  for (int j = 0; j < 32; ++j) {
    const float want = j == 5 ? 31.5f : j < 16 ? 15.5f : 0.5f;
    EXPECT_EQ(x[j], want) << j;
  }
}

TEST(KquantTest, DecodesIq4Nl) {
  BlockIq4Nl b{};
  b.d = FloatToFp16(2.0f);
  for (int j = 0; j < 16; ++j) b.quants[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const auto x = Decode(b, 32);
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 2.0f * table[j]) << j;
    EXPECT_EQ(x[j + 16], 2.0f * table[15 - j]) << j;
  }
}

TEST(KquantTest, DecodesQ2_K) {
  BlockQ2_K b{};
  b.d = FloatToFp16(1.0f);
  b.dmin = FloatToFp16(0.5f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(s | (15 - s) << 4);
  std::memset(b.quants, 0xe4, 64);  // 2-bit groups 0, 1, 2, 3 from the low bits up
  const auto x = Decode(b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 16, q = e % 128 / 32;
    EXPECT_EQ(x[e], 1.0f * s * q - 0.5f * (15 - s)) << e;
  }
  EXPECT_EQ(x[40], -4.5f);   // scale 2, q 1, min 13
  EXPECT_EQ(x[200], 22.5f);  // scale 12, q 2, min 3
}

TEST(KquantTest, DecodesQ3_K) {
  BlockQ3_K b{};
  b.d = FloatToFp16(0.5f);
  std::memset(b.scales, 0x21, 8);      // low 4 bits: 1 for scales 0..7, 2 for 8..15
  std::memset(b.scales + 8, 0xe4, 4);  // high 2 bits of scale s: s / 4
  std::memset(b.hmask, 0xff, 32);
  b.hmask[0] = 0;                   // bit 2 clear (q - 4) for elements with e % 32 == 0
  std::memset(b.quants, 0xe4, 64);  // low 2 bits: e % 128 / 32
  const auto x = Decode(b, 256);
  const int scale[4] = {1 - 32, 1 + 16 - 32, 2 + 32 - 32, 2 + 48 - 32};  // by s / 4
  for (int e = 0; e < 256; ++e) {
    const int q = e % 128 / 32 - (e % 32 == 0 ? 4 : 0);
    EXPECT_EQ(x[e], 0.5f * scale[e / 16 / 4] * q) << e;
  }
  EXPECT_EQ(x[0], 62.0f);    // 0.5 * -31 * -4
  EXPECT_EQ(x[33], -15.5f);  // 0.5 * -31 * 1
  EXPECT_EQ(x[224], -9.0f);  // 0.5 * 18 * (3 - 4)
}

// Scales/mins for the Q4_K and Q5_K tests: sub-block 0: 1/5, 1..3: 3/5, 4: 18/3, 5..7: 2/3.
void SetK4Scales(uint8_t scales[12]) {
  scales[0] = 1 | 1 << 6;  // scale 0 = 1; bits 6-7: high bits of scale 4
  scales[1] = scales[2] = scales[3] = 3;
  for (int s = 4; s < 8; ++s) scales[s] = 5;      // mins 0..3
  for (int s = 8; s < 12; ++s) scales[s] = 0x32;  // scales 4..7 low 2, mins 4..7 low 3
}
constexpr float kK4Scale[8] = {1, 3, 3, 3, 18, 2, 2, 2};
constexpr float kK4Min[8] = {5, 5, 5, 5, 3, 3, 3, 3};

TEST(KquantTest, DecodesQ4_K) {
  BlockQ4_K b{};
  b.d = FloatToFp16(1.0f);
  b.dmin = FloatToFp16(0.25f);
  SetK4Scales(b.scales);
  std::memset(b.quants, 0x9a, 128);  // even sub-blocks 10, odd ones 9
  const auto x = Decode(b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    EXPECT_EQ(x[e], kK4Scale[s] * (s % 2 == 0 ? 10 : 9) - 0.25f * kK4Min[s]) << e;
  }
  EXPECT_EQ(x[0], 8.75f);
  EXPECT_EQ(x[40], 25.75f);
  EXPECT_EQ(x[130], 179.25f);
  EXPECT_EQ(x[255], 17.25f);
}

TEST(KquantTest, DecodesQ5_K) {
  BlockQ5_K b{};
  b.d = FloatToFp16(1.0f);
  b.dmin = FloatToFp16(0.25f);
  SetK4Scales(b.scales);
  std::memset(b.quants, 0x9a, 128);
  std::memset(b.qh, 0x10, 32);  // bit 4 for sub-block 4 only
  const auto x = Decode(b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const int q = (s % 2 == 0 ? 10 : 9) + (s == 4 ? 16 : 0);
    EXPECT_EQ(x[e], kK4Scale[s] * q - 0.25f * kK4Min[s]) << e;
  }
  EXPECT_EQ(x[130], 467.25f);  // 18 * 26 - 0.75
}

TEST(KquantTest, DecodesQ6_K) {
  BlockQ6_K b{};
  b.d = FloatToFp16(0.5f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  std::memset(b.ql, 0x21, 128);  // low 4 bits: 1 for j = 0, 1; 2 for j = 2, 3
  std::memset(b.qh, 0xe4, 64);   // high 2 bits: j
  const auto x = Decode(b, 256);
  const int q[4] = {1 - 32, 1 + 16 - 32, 2 + 32 - 32, 2 + 48 - 32};
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(x[e], 0.5f * (e / 16 - 8) * q[e % 128 / 32]) << e;
  }
  EXPECT_EQ(x[0], 124.0f);
  EXPECT_EQ(x[40], 45.0f);
  EXPECT_EQ(x[255], 63.0f);
}

// RMS error over RMS value of a round trip of uniform [-1, 1) values, per type: a bound a little
// above the measured figure (in parentheses), so that a broken layout or a lost bit fails.
TEST(KquantTest, RoundTripErrors) {
  struct Bound {
    GgmlType type;
    double rms;
  };
  const Bound bounds[] = {{GgmlType::kQ4_1, 0.08},  {GgmlType::kQ5_0, 0.04},
                          {GgmlType::kQ5_1, 0.04},  {GgmlType::kIQ4_NL, 0.08},
                          {GgmlType::kMXFP4, 0.16}, {GgmlType::kQ2_K, 0.30},
                          {GgmlType::kQ3_K, 0.16},  {GgmlType::kQ4_K, 0.08},
                          {GgmlType::kQ5_K, 0.04},  {GgmlType::kQ6_K, 0.02}};
  std::mt19937 rng(7);
  const int n = 4096;
  const auto x = RandomRow(n, rng);
  for (const Bound& b : bounds) {
    std::vector<uint8_t> bytes(RowBytes(b.type, n));
    QuantizeRow(b.type, x.data(), n, bytes.data());
    std::vector<float> y(n);
    DequantizeRow(b.type, bytes.data(), n, y.data());
    double err = 0, ref = 0, max_err = 0;
    for (int i = 0; i < n; ++i) {
      err += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
      ref += static_cast<double>(x[i]) * x[i];
      max_err = std::max(max_err, std::fabs(static_cast<double>(y[i]) - x[i]));
    }
    const double rms = std::sqrt(err / ref);
    EXPECT_LT(rms, b.rms) << GgmlTypeName(b.type);
    RecordProperty(std::string("rms_") + GgmlTypeName(b.type), std::to_string(rms));
    std::printf("%-7s rms error / rms %.4f, max |error| %.4f\n", GgmlTypeName(b.type), rms,
                max_err);
  }
}

// Q4_1's simple encoder: every value within half a step (plus the f16 rounding of d and m).
TEST(KquantTest, Q4_1WithinHalfAStep) {
  std::mt19937 rng(3);
  const auto x = RandomRow(256, rng);
  std::vector<uint8_t> bytes(RowBytes(GgmlType::kQ4_1, 256));
  QuantizeRow(GgmlType::kQ4_1, x.data(), 256, bytes.data());
  std::vector<float> y(256);
  DequantizeRow(GgmlType::kQ4_1, bytes.data(), 256, y.data());
  for (int b = 0; b < 8; ++b) {
    const auto block = LoadBlock<BlockQ4_1>(bytes.data() + b * sizeof(BlockQ4_1));
    const double d = Fp16ToFloat(block.d);
    for (int j = 0; j < 32; ++j) {
      const int i = b * 32 + j;
      EXPECT_LE(std::fabs(y[i] - x[i]), 0.5 * d + 16 * d * std::ldexp(1.0, -11) + 1e-3) << i;
    }
  }
}

TEST(KquantTest, Q8_KRoundsAsLlamaCpp) {
  std::mt19937 rng(11);
  auto x = RandomRow(512, rng);
  x[300] = -1.5f;  // the second block's extreme is negative
  std::vector<uint8_t> bytes(RowBytes(GgmlType::kQ8_K, 512));
  QuantizeRow(GgmlType::kQ8_K, x.data(), 512, bytes.data());
  for (int b = 0; b < 2; ++b) {
    const auto block = LoadBlock<BlockQ8_K>(bytes.data() + b * sizeof(BlockQ8_K));
    float amax = 0, max = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[b * 256 + j]) > amax) {
        amax = std::fabs(x[b * 256 + j]);
        max = x[b * 256 + j];
      }
    }
    const float iscale = -127.0f / max;
    EXPECT_EQ(block.d, 1.0f / iscale);
    for (int j = 0; j < 256; ++j) {
      const int want = std::min(127, static_cast<int>(std::nearbyint(iscale * x[b * 256 + j])));
      EXPECT_EQ(block.quants[j], want) << b << " " << j;
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += block.quants[16 * s + j];
      EXPECT_EQ(block.bsums[s], sum);
    }
  }
  // Ties round to even (llama.cpp's nearest_int): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2.
  std::vector<float> t(256, 0.0f);
  t[0] = -127.0f;  // iscale = 1
  t[1] = 0.5f;
  t[2] = 1.5f;
  t[3] = 2.5f;
  QuantizeRow(GgmlType::kQ8_K, t.data(), 256, bytes.data());
  const auto block = LoadBlock<BlockQ8_K>(bytes.data());
  EXPECT_EQ(block.quants[0], -127);
  EXPECT_EQ(block.quants[1], 0);
  EXPECT_EQ(block.quants[2], 2);
  EXPECT_EQ(block.quants[3], 2);
}

TEST(KquantTest, Q8_1CarriesItsSum) {
  std::mt19937 rng(12);
  const auto x = RandomRow(64, rng);
  std::vector<uint8_t> bytes(RowBytes(GgmlType::kQ8_1, 64));
  QuantizeRow(GgmlType::kQ8_1, x.data(), 64, bytes.data());
  for (int b = 0; b < 2; ++b) {
    const auto block = LoadBlock<BlockQ8_1>(bytes.data() + b * sizeof(BlockQ8_1));
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      EXPECT_EQ(block.quants[j], static_cast<int>(std::nearbyint(x[b * 32 + j] * (127.0f / amax))));
      sum += block.quants[j];
    }
    EXPECT_EQ(block.d, FloatToFp16(d));
    EXPECT_EQ(block.s, FloatToFp16(d * static_cast<float>(sum)));
  }
}

// One problem: n weight rows and m activation rows of length k, activations already in the
// weight type's format.
struct Problem {
  GgmlType type;
  int m, n, k;
  size_t w_row, x_row;
  std::vector<uint8_t> w, x;
  std::vector<float> w_float, x_float;

  Problem(GgmlType type_in, int m_in, int n_in, int k_in, uint32_t seed)
      : type(type_in), m(m_in), n(n_in), k(k_in) {
    const GgmlType x_type = ActivationTypeFor(type);
    w_row = RowBytes(type, k);
    x_row = RowBytes(x_type, k);
    w.resize(w_row * n);
    x.resize(x_row * m);
    w_float.resize(static_cast<size_t>(n) * k);
    x_float.resize(static_cast<size_t>(m) * k);
    std::mt19937 rng(seed);
    for (int j = 0; j < n; ++j) {
      const auto row = RandomRow(k, rng);
      QuantizeRow(type, row.data(), k, w.data() + w_row * j);
      DequantizeRow(type, w.data() + w_row * j, k, w_float.data() + static_cast<size_t>(j) * k);
    }
    for (int i = 0; i < m; ++i) {
      const auto row = RandomRow(k, rng);
      if (x_type == GgmlType::kQ8_0) {
        ScalarKernels().quantize_row_q8_0(row.data(), k,
                                          reinterpret_cast<BlockQ8_0*>(x.data() + x_row * i));
      } else {
        QuantizeRow(x_type, row.data(), k, x.data() + x_row * i);
      }
      DequantizeRow(x_type, x.data() + x_row * i, k, x_float.data() + static_cast<size_t>(i) * k);
    }
  }

  // y[i * ldy + j] for i in [i0, i0 + rows), j in [n_begin, n_end).
  void Run(const KernelTable& table, int i0, int rows, int n_begin, int n_end,
           std::vector<float>& y) const {
    TileScratch scratch;
    const MatmulTile tile{
        .w = w.data(),
        .w_row_bytes = w_row,
        .x = x.data() + x_row * i0,
        .x_row_bytes = x_row,
        .m = rows,
        .k = k,
        .n_begin = n_begin,
        .n_end = n_end,
        .y = y.data() + static_cast<size_t>(i0) * n,
        .ldy = n,
        .scratch = &scratch,
    };
    MatmulFor(table, type)(tile);
  }

  // Σ w * x in double over the dequantized weights and activations; for Q8_1 activations the
  // weight's offset m multiplies the block's stored sum s (f16(d_x * Σ q_x)), as the format says.
  double Reference(int i, int j) const {
    const float* wr = w_float.data() + static_cast<size_t>(j) * k;
    const float* xr = x_float.data() + static_cast<size_t>(i) * k;
    double sum = 0;
    if (ActivationTypeFor(type) != GgmlType::kQ8_1) {
      for (int kk = 0; kk < k; ++kk) sum += static_cast<double>(wr[kk]) * xr[kk];
      return sum;
    }
    Unpacked32 u;
    for (int b = 0; b < k / 32; ++b) {
      Unpack32For(type)(w.data() + w_row * j + b * TraitsOf(type).block_bytes, u);
      const auto xb = LoadBlock<BlockQ8_1>(x.data() + x_row * i + b * sizeof(BlockQ8_1));
      for (int e = 0; e < 32; ++e) sum += static_cast<double>(u.d) * u.q[e] * xr[b * 32 + e];
      sum += static_cast<double>(u.m) * Fp16ToFloat(xb.s);
    }
    return sum;
  }

  // Σ |each term of the weight's value| * |x|: the weight's value is d * sc * q - dmin * min,
  // whose parts can be much larger than their difference.
  double AbsDot(int i, int j) const {
    std::vector<float> parts(k);
    const uint8_t* row = w.data() + w_row * j;
    if (const UnpackKFn unpack = UnpackKFor(type)) {
      UnpackedK u;
      for (int b = 0; b < k / 256; ++b) {
        unpack(row + b * TraitsOf(type).block_bytes, u);
        for (int e = 0; e < 256; ++e) {
          const int s = e / u.sub;
          parts[b * 256 + e] =
              std::fabs(u.d * u.scales[s] * u.q[e]) + std::fabs(u.dmin * u.mins[s]);
        }
      }
    } else {
      Unpacked32 u;
      for (int b = 0; b < k / 32; ++b) {
        Unpack32For(type)(row + b * TraitsOf(type).block_bytes, u);
        for (int e = 0; e < 32; ++e) parts[b * 32 + e] = std::fabs(u.d * u.q[e]) + std::fabs(u.m);
      }
    }
    double s = 0;
    for (int kk = 0; kk < k; ++kk)
      s += parts[kk] * std::fabs(x_float[static_cast<size_t>(i) * k + kk]);
    return s;
  }
};

TEST(KquantTest, TilesMatchDoubleReference) {
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    const int block = static_cast<int>(TraitsOf(type).block_elements);
    for (int k : {block, 3 * block, 4096}) {
      const Problem p(type, 3, 19, k, 100 + k);
      std::vector<float> y(static_cast<size_t>(p.m) * p.n);
      p.Run(ScalarKernels(), 0, p.m, 0, p.n, y);
      double worst = 0;
      for (int i = 0; i < p.m; ++i) {
        for (int j = 0; j < p.n; ++j) {
          const double want = p.Reference(i, j);
          // Each block: an exact integer sum, two scale products and one accumulation (a third
          // product and add for the min or offset); the dequantized reference rounds each weight.
          const double terms = 4.0 * (k / block) + 4;
          const double tol = terms * std::numeric_limits<float>::epsilon() * p.AbsDot(i, j);
          const double got = y[static_cast<size_t>(i) * p.n + j];
          EXPECT_NEAR(got, want, tol) << "k " << k << " i " << i << " j " << j;
          worst = std::max(worst, std::fabs(got - want) / std::max(p.AbsDot(i, j), 1e-30));
        }
      }
      if (k == 4096)
        std::printf("%-7s k %d: max |tile - double| / sum|w x| = %.2e\n", GgmlTypeName(type), k,
                    worst);
    }
  }
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Every table, every batch size 1..17 and odd output ranges give the bits of the scalar table
// computing the whole problem in one call.
TEST(KquantTest, EveryTableBatchAndRangeGivesSameBits) {
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    const int k =
        2 * static_cast<int>(TraitsOf(type).block_elements) * (type == GgmlType::kQ2_K ? 1 : 3);
    const Problem p(type, 17, 37, k, 5);
    std::vector<float> want(static_cast<size_t>(p.m) * p.n);
    p.Run(ScalarKernels(), 0, p.m, 0, p.n, want);
    for (const KernelTable* table : AllTables()) {
      SCOPED_TRACE(table->isa);
      EXPECT_NE(MatmulFor(*table, type), nullptr);
      for (int m = 1; m <= 17; ++m) {
        std::vector<float> got(want.size(), -1.0f);
        for (int i0 = 0; i0 < p.m; i0 += m) {
          const int rows = std::min(m, p.m - i0);
          // Three odd ranges: [0, 5), [5, 5 + m), [5 + m, 37).
          p.Run(*table, i0, rows, 0, 5, got);
          p.Run(*table, i0, rows, 5, 5 + m, got);
          p.Run(*table, i0, rows, 5 + m, p.n, got);
        }
        for (size_t e = 0; e < want.size(); ++e) {
          ASSERT_TRUE(SameBits(got[e], want[e])) << "m " << m << " element " << e;
        }
      }
    }
  }
}

// Through Matmul (activation quantization, row chunks over threads): each row of a batch of m
// gets the bits it gets alone, on every table.
TEST(KquantTest, MatmulIsBatchInvariantOnEveryTable) {
  ThreadPool pool(2);
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    const int k = 512, n = 33;
    std::mt19937 rng(21);
    std::vector<uint8_t> w(RowBytes(type, k) * n);
    for (int j = 0; j < n; ++j) {
      const auto row = RandomRow(k, rng);
      QuantizeRow(type, row.data(), k, w.data() + RowBytes(type, k) * j);
    }
    const WeightMatrix matrix{
        .type = type, .data = w.data(), .n_out = n, .n_in = k, .row_bytes = RowBytes(type, k)};
    const auto x = RandomRow(17 * k, rng);
    std::vector<float> alone(static_cast<size_t>(17) * n);
    MatmulScratch scratch(pool.size());
    for (int i = 0; i < 17; ++i) {
      Matmul(ScalarKernels(), matrix, x.data() + static_cast<size_t>(i) * k, 1,
             alone.data() + static_cast<size_t>(i) * n, scratch, pool);
    }
    for (const KernelTable* table : AllTables()) {
      SCOPED_TRACE(table->isa);
      for (int m = 1; m <= 17; ++m) {
        std::vector<float> y(static_cast<size_t>(m) * n);
        Matmul(*table, matrix, x.data(), m, y.data(), scratch, pool);
        for (size_t e = 0; e < y.size(); ++e) {
          ASSERT_TRUE(SameBits(y[e], alone[e])) << "m " << m << " element " << e;
        }
      }
    }
  }
}

// A block with a NaN or infinite scale decodes and multiplies without a crash; only its own
// row's outputs become non-finite.
TEST(KquantTest, NonFiniteScalesComputeWithoutCrash) {
  for (GgmlType type : kNewTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    const int k = static_cast<int>(TraitsOf(type).block_elements);
    for (uint16_t bad : {uint16_t{0x7e00}, uint16_t{0x7c00}, uint16_t{0xfc00}}) {
      Problem p(type, 2, 3, k, 9);
      // Every f16 field of row 1's block: the scale(s) sit at the start (Q4_1..IQ4_NL, Q4_K,
      // Q5_K) or at the end (Q2_K, Q3_K, Q6_K). MXFP4's E8M0 byte has no non-finite value: its
      // largest, 255 (the OCP NaN), is 2^127 to GGML, which can overflow only row 1's outputs.
      uint8_t* row = p.w.data() + p.w_row;
      const size_t bytes = p.w_row;
      if (type == GgmlType::kMXFP4) {
        row[0] = 0xff;
      } else if (k == 32 || type == GgmlType::kQ4_K || type == GgmlType::kQ5_K) {
        std::memcpy(row, &bad, 2);
      } else {
        std::memcpy(row + bytes - 2, &bad, 2);
      }
      std::vector<float> decoded(k);
      DequantizeRow(type, row, k, decoded.data());
      std::vector<float> y(static_cast<size_t>(p.m) * p.n);
      p.Run(ScalarKernels(), 0, p.m, 0, p.n, y);
      for (int i = 0; i < p.m; ++i) {
        EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(i) * p.n + 0])) << i;
        EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(i) * p.n + 2])) << i;
      }
    }
  }
}

// Non-finite activations quantize without a crash (NaN elements become 0).
TEST(KquantTest, NonFiniteActivationsQuantizeWithoutCrash) {
  std::vector<float> x(256, 0.25f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[9] = std::numeric_limits<float>::infinity();
  std::vector<uint8_t> bytes(RowBytes(GgmlType::kQ8_K, 256));
  QuantizeRow(GgmlType::kQ8_K, x.data(), 256, bytes.data());
  std::vector<uint8_t> bytes1(RowBytes(GgmlType::kQ8_1, 256));
  QuantizeRow(GgmlType::kQ8_1, x.data(), 256, bytes1.data());
  for (GgmlType type : kNewTypes) {
    std::vector<uint8_t> w(RowBytes(type, 256));
    QuantizeRow(type, x.data(), 256, w.data());
  }
}

// The position of a tensor's type id in a serialized GGUF header: after its name, its dimension
// count and its dimensions.
size_t TypeFieldOffset(const std::vector<uint8_t>& bytes, const std::string& name, int n_dims) {
  const auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  return static_cast<size_t>(it - bytes.begin()) + name.size() + 4 + 8 * n_dims;
}

TEST(KquantTest, GgufRefusesTensorsThatDoNotFitTheirType) {
  std::mt19937 rng(4);
  const auto row = RandomRow(512, rng);
  std::vector<uint8_t> data(RowBytes(GgmlType::kQ4_K, 512));
  QuantizeRow(GgmlType::kQ4_K, row.data(), 512, data.data());
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.AddTensor("blk.0.ffn_down.weight", GgmlType::kQ4_K, {256, 2}, data);
  const std::vector<uint8_t> good = writer.Serialize();
  ASSERT_TRUE(GgufFile::Parse(good.data(), good.size(), "good.gguf").ok());
  const size_t type_at = TypeFieldOffset(good, "blk.0.ffn_down.weight", 2);
  uint32_t type_id = 0;
  std::memcpy(&type_id, good.data() + type_at, 4);
  ASSERT_EQ(type_id, 12u);

  // Truncated in the middle of the second super-block.
  {
    std::vector<uint8_t> cut(good.begin(), good.end() - 100);  // padding after the data < 32
    const auto parsed = GgufFile::Parse(cut.data(), cut.size(), "cut.gguf");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.message().find("blk.0.ffn_down.weight"), std::string::npos)
        << parsed.message();
  }
  // The same bytes declared as Q6_K (210 bytes a row, 420 in all): more than the file holds.
  {
    std::vector<uint8_t> bad = good;
    const uint32_t q6 = 14;
    std::memcpy(bad.data() + type_at, &q6, 4);
    const auto parsed = GgufFile::Parse(bad.data(), bad.size(), "q6.gguf");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.message().find("exceeds"), std::string::npos) << parsed.message();
  }
  // A row length that is not a multiple of the super-block.
  {
    std::vector<uint8_t> bad = good;
    const uint64_t row_length = 128, rows = 4;
    std::memcpy(bad.data() + type_at - 16, &row_length, 8);
    std::memcpy(bad.data() + type_at - 8, &rows, 8);
    const auto parsed = GgufFile::Parse(bad.data(), bad.size(), "rows.gguf");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.message().find("not a multiple of the Q4_K block size 256"), std::string::npos)
        << parsed.message();
  }
  // An unknown type id is refused with the tensor's name and the id.
  {
    std::vector<uint8_t> bad = good;
    const uint32_t unknown = 99;
    std::memcpy(bad.data() + type_at, &unknown, 4);
    const auto parsed = GgufFile::Parse(bad.data(), bad.size(), "unknown.gguf");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.message().find("unknown tensor type 99"), std::string::npos)
        << parsed.message();
    EXPECT_NE(parsed.message().find("blk.0.ffn_down.weight"), std::string::npos)
        << parsed.message();
  }
}

}  // namespace
}  // namespace kvserve
