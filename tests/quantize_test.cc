// QuantizeRow / DequantizeRow round trips with error bounds from each format, and the util/half.h
// conversions against slow references computed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quantize.h"
#include "util/half.h"

namespace kvserve {
namespace {

std::vector<float> RandomRow(int n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng) * scale;
  return x;
}

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& x) {
  const int n = static_cast<int>(x.size());
  std::vector<uint8_t> bytes(RowBytes(type, n));
  QuantizeRow(type, x.data(), n, bytes.data());
  std::vector<float> out(n);
  DequantizeRow(type, bytes.data(), n, out.data());
  return out;
}

TEST(QuantizeTest, RowBytes) {
  EXPECT_EQ(RowBytes(GgmlType::kF32, 64), 256u);
  EXPECT_EQ(RowBytes(GgmlType::kF16, 64), 128u);
  EXPECT_EQ(RowBytes(GgmlType::kBF16, 64), 128u);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_0, 64), 36u);
}

TEST(QuantizeTest, F32IsExact) {
  const auto x = RandomRow(100, 1, 3.0f);
  EXPECT_EQ(RoundTrip(GgmlType::kF32, x), x);
}

// Half an ulp of the target format, relative, for normal results: f16 keeps 11 significant bits,
// bf16 8. Below the f16 normal range the absolute step is 2^-24, so the error is at most 2^-25.
TEST(QuantizeTest, F16AndBf16WithinHalfUlp) {
  for (float scale : {1e-6f, 1e-3f, 1.0f, 1000.0f, 60000.0f}) {
    const auto x = RandomRow(256, 2, scale);
    const auto h = RoundTrip(GgmlType::kF16, x);
    const auto b = RoundTrip(GgmlType::kBF16, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double ax = std::fabs(x[i]);
      EXPECT_LE(std::fabs(static_cast<double>(h[i]) - x[i]),
                std::max(ax * std::ldexp(1.0, -11), std::ldexp(1.0, -25)))
          << "f16 " << x[i] << " -> " << h[i];
      EXPECT_LE(std::fabs(static_cast<double>(b[i]) - x[i]), ax * std::ldexp(1.0, -8))
          << "bf16 " << x[i] << " -> " << b[i];
    }
  }
}

// Half an f16 ulp at d: relative 2^-11 for normal f16, absolute 2^-25 in the subnormal range.
double Fp16Rounding(double d) {
  return std::max(std::fabs(d) * std::ldexp(1.0, -11), std::ldexp(1.0, -25));
}

// Q8_0: d = amax / 127 is stored as f16 d' (|d' - d| <= Fp16Rounding(d)), q = round(x / d) with
// |q| <= 127, so |d' q - x| <= d / 2 + 127 * Fp16Rounding(d), plus float rounding of x / d (a few
// ulps of amax, allowed as amax * 2^-20).
TEST(QuantizeTest, Q8_0ErrorWithinBound) {
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    auto x = RandomRow(32 * 40, 3, scale);
    std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block stays zero
    const auto y = RoundTrip(GgmlType::kQ8_0, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      double amax = 0;
      for (int j = 0; j < 32; ++j)
        amax = std::max(amax, std::fabs(static_cast<double>(x[32 * b + j])));
      const double d = amax / 127;
      const double bound = d / 2 + 127 * Fp16Rounding(d) + amax * std::ldexp(1.0, -20);
      for (int j = 0; j < 32; ++j) {
        const size_t i = 32 * b + j;
        EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound)
            << "block " << b << " element " << j << ": " << x[i] << " -> " << y[i];
      }
    }
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f);
  }
}

// Q4_0: d = max / -8 (max the element of largest magnitude, with its sign) as f16 d', q =
// min(15, floor(x / d + 8.5)) - 8, so |err| <= |d| / 2, except that x / d in (7.5, 8] is clamped to
// 7 (|err| <= |d|); plus the scale rounding, 8 * Fp16Rounding(d), and float rounding of x / d.
TEST(QuantizeTest, Q4_0ErrorWithinBound) {
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    auto x = RandomRow(32 * 40, 4, scale);
    // Block 1 holds both +amax and -amax: -amax lands on the clamped end.
    x[40] = scale;
    x[41] = -scale;
    const auto y = RoundTrip(GgmlType::kQ4_0, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      double max = 0;
      for (int j = 0; j < 32; ++j) {
        if (std::fabs(x[32 * b + j]) > std::fabs(max)) max = x[32 * b + j];
      }
      const double d = max / -8;
      const double extra = 8 * Fp16Rounding(d) + std::fabs(max) * 1e-6;
      for (int j = 0; j < 32; ++j) {
        const size_t i = 32 * b + j;
        const double ratio = d != 0 ? x[i] / d : 0;
        const double bound = (ratio > 7.5 ? std::fabs(d) : std::fabs(d) / 2) + extra;
        EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound)
            << "block " << b << " element " << j << ": " << x[i] << " -> " << y[i];
      }
    }
  }
}

// The exact value of an f16 bit pattern, in double (NaN for NaNs).
double Fp16Value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f) {
    v = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                      : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    v = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
  }
  return sign ? -v : v;
}

bool IsFp16Nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(HalfTest, EveryFp16PatternRoundTrips) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = Fp16ToFloat(h);
    if (IsFp16Nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(IsFp16Nan(FloatToFp16(f))) << std::hex << bits;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), Fp16Value(h)) << std::hex << bits;
    EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << bits;
    EXPECT_EQ(FloatToFp16(f), h) << std::hex << bits;
  }
}

// Slow reference: the nearest f16 to f by exhaustive comparison with the neighbouring patterns,
// ties to the even pattern; beyond 65504 the next "value" is 65536 (= infinity, 0x7c00).
uint16_t SlowFloatToFp16(float f) {
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65536.0) return sign | 0x7c00;
  // Largest pattern p with value(p) <= a (patterns 0 .. 0x7c00 are increasing in value).
  uint16_t lo = 0;
  for (int step = 0x4000; step > 0; step >>= 1) {
    const int p = lo + step;
    const double v = p == 0x7c00 ? 65536.0 : Fp16Value(static_cast<uint16_t>(p));
    if (p <= 0x7c00 && v <= a) lo = static_cast<uint16_t>(p);
  }
  if (lo == 0x7c00) return sign | 0x7c00;
  const double v_lo = Fp16Value(lo);
  const double v_hi = lo + 1 == 0x7c00 ? 65536.0 : Fp16Value(static_cast<uint16_t>(lo + 1));
  uint16_t pick;
  if (a - v_lo < v_hi - a) {
    pick = lo;
  } else if (a - v_lo > v_hi - a) {
    pick = lo + 1;
  } else {
    pick = (lo & 1) ? lo + 1 : lo;
  }
  return sign | pick;
}

TEST(HalfTest, FloatToFp16RoundsToNearestEven) {
  std::vector<float> values;
  // Every midpoint between neighbouring f16 values (ties), and the floats just beside it.
  for (uint32_t p = 0; p < 0x7c00; ++p) {
    const double hi = p + 1 == 0x7c00 ? 65536.0 : Fp16Value(static_cast<uint16_t>(p + 1));
    const float mid = static_cast<float>((Fp16Value(static_cast<uint16_t>(p)) + hi) / 2);
    values.push_back(mid);
    values.push_back(std::nextafter(mid, 0.0f));
    values.push_back(std::nextafter(mid, 1e30f));
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    // Random floats around the f16 range: exponents 2^-30 .. 2^17.
    const uint32_t bits = (rng() & 0x807fffff) | ((97 + rng() % 48) << 23);
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(1e-30f);
  values.push_back(std::numeric_limits<float>::max());
  int failures = 0;
  for (float v : values) {
    for (float f : {v, -v}) {
      if (FloatToFp16(f) != SlowFloatToFp16(f) && ++failures < 10) {
        ADD_FAILURE() << "FloatToFp16(" << f << ") = " << std::hex << FloatToFp16(f)
                      << ", reference " << SlowFloatToFp16(f);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(HalfTest, EveryBf16PatternRoundTrips) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = Bf16ToFloat(b);
    uint32_t fbits;
    std::memcpy(&fbits, &f, 4);
    EXPECT_EQ(fbits, bits << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f)))) << std::hex << bits;
    } else {
      EXPECT_EQ(FloatToBf16(f), b) << std::hex << bits;
    }
  }
}

// Slow reference: the nearer of the two bf16 values around f (in double), ties to even; a bf16
// pattern above the largest finite one is infinity, treated as 2^128 for the comparison.
uint16_t SlowFloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const auto lo = static_cast<uint16_t>(bits >> 16);
  const auto hi = static_cast<uint16_t>(lo + 1);
  const auto value = [](uint16_t p) {
    if ((p & 0x7fff) == 0x7f80) return std::ldexp(std::signbit(Bf16ToFloat(p)) ? -1.0 : 1.0, 128);
    return static_cast<double>(Bf16ToFloat(p));
  };
  const double d_lo = std::fabs(static_cast<double>(f) - value(lo));
  const double d_hi = std::fabs(value(hi) - static_cast<double>(f));
  if (d_lo < d_hi) return lo;
  if (d_lo > d_hi) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(HalfTest, FloatToBf16RoundsToNearestEven) {
  std::mt19937 rng(6);
  int failures = 0;
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 1) bits = (bits & 0xffff0000) | 0x8000;  // exact tie
    if (i % 4 == 2) bits = (bits & 0xffff0000) | 0x7fff;  // just below a tie
    if (i % 4 == 3) bits = (bits & 0xffff0000) | 0x8001;  // just above a tie
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f) || std::isinf(f)) {
      if (std::isnan(f)) {
        EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      }
      continue;
    }
    if (FloatToBf16(f) != SlowFloatToBf16(f) && ++failures < 10) {
      ADD_FAILURE() << "FloatToBf16(" << f << ") = " << std::hex << FloatToBf16(f) << ", reference "
                    << SlowFloatToBf16(f);
    }
  }
  // The largest finite float is past the midpoint below 2^128, so it rounds to infinity.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace kvserve
