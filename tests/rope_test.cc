// The rotary embedding op (kernels/cpu/ops.h RopeInPlace): the interleaved mode computes what it
// computed before its modes and factors existed, bit for bit; split halves rotate the same pairs
// by the same angles, only placed differently; frequency divisors and the position scale turn each
// pair by pos * scale * base^(-2i/d) / f_i.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"

namespace kvserve {
namespace {

// RopeInPlace as it was before RopeParams: GGML "normal" mode, no factors, no scale.
void OldRope(float* x, int n_heads, int head_dim, int rope_dims, int32_t pos, float freq_base) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rope_dims));
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    float theta = static_cast<float>(pos);
    for (int i = 0; i < rope_dims; i += 2) {
      const float cos_theta = std::cos(theta);
      const float sin_theta = std::sin(theta);
      const float x0 = head[i];
      const float x1 = head[i + 1];
      head[i] = x0 * cos_theta - x1 * sin_theta;
      head[i + 1] = x0 * sin_theta + x1 * cos_theta;
      theta *= theta_scale;
    }
  }
}

std::vector<float> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

constexpr int kHeads = 3;
constexpr int kHeadDim = 64;

TEST(RopeTest, InterleavedWithoutFactorsIsTheOldOpBitForBit) {
  for (int rope_dims : {64, 32, 2}) {
    for (int32_t pos : {0, 1, 7, 511, 100000}) {
      for (float base : {10000.0f, 500000.0f}) {
        std::vector<float> ours = Random(kHeads * kHeadDim, pos + rope_dims);
        std::vector<float> old = ours;
        RopeInPlace(ours.data(), kHeads, kHeadDim, {.rope_dims = rope_dims, .freq_base = base},
                    pos);
        OldRope(old.data(), kHeads, kHeadDim, rope_dims, pos, base);
        EXPECT_TRUE(ours == old) << "rope_dims " << rope_dims << " pos " << pos;
      }
    }
  }
}

// Split halves pair (i, i + d/2) where interleaved pairs (2i, 2i+1); with the values moved to
// match, the two modes give the same bits (same angles, same arithmetic).
TEST(RopeTest, SplitHalvesRotateTheSamePairsAsInterleavedMoved) {
  for (int rope_dims : {64, 16}) {
    for (int32_t pos : {0, 3, 300}) {
      const std::vector<float> x = Random(kHeads * kHeadDim, 7 * pos + rope_dims);
      std::vector<float> split = x;
      std::vector<float> moved = x;  // pair i of each head at (2i, 2i+1)
      const int half = rope_dims / 2;
      for (int h = 0; h < kHeads; ++h) {
        for (int i = 0; i < half; ++i) {
          moved[h * kHeadDim + 2 * i] = x[h * kHeadDim + i];
          moved[h * kHeadDim + 2 * i + 1] = x[h * kHeadDim + i + half];
        }
      }
      RopeInPlace(split.data(), kHeads, kHeadDim,
                  {.rope_dims = rope_dims, .freq_base = 1e6f, .mode = RopeMode::kSplitHalves}, pos);
      RopeInPlace(moved.data(), kHeads, kHeadDim, {.rope_dims = rope_dims, .freq_base = 1e6f}, pos);
      for (int h = 0; h < kHeads; ++h) {
        for (int i = 0; i < half; ++i) {
          EXPECT_EQ(split[h * kHeadDim + i], moved[h * kHeadDim + 2 * i]);
          EXPECT_EQ(split[h * kHeadDim + i + half], moved[h * kHeadDim + 2 * i + 1]);
        }
        for (int j = rope_dims; j < kHeadDim; ++j) {  // past rope_dims: untouched
          EXPECT_EQ(split[h * kHeadDim + j], x[h * kHeadDim + j]);
        }
      }
    }
  }
}

// Against the formula in double: pair i turns by pos * scale * base^(-2i/d) / f_i. The op's angle
// is a running float product (as GGML's), a few ulps from the exact one per pair: here the angle
// reaches 37.5 rad and drifts by ~1e-4 rad, so each output is within ~3e-4; a wrong divisor or
// scale is off by O(1).
TEST(RopeTest, FactorsAndScaleTurnEachPairByTheFormula) {
  const int rope_dims = 64;
  const int32_t pos = 300;
  const float base = 500000.0f;
  std::vector<float> factors(rope_dims / 2);
  for (int i = 0; i < rope_dims / 2; ++i) factors[i] = 1.0f + 0.25f * static_cast<float>(i % 9);
  for (RopeMode mode : {RopeMode::kInterleaved, RopeMode::kSplitHalves}) {
    const std::vector<float> x = Random(kHeads * kHeadDim, 11);
    std::vector<float> ours = x;
    RopeInPlace(ours.data(), kHeads, kHeadDim,
                {.rope_dims = rope_dims,
                 .freq_base = base,
                 .mode = mode,
                 .freq_factors = factors.data(),
                 .position_scale = 0.125f},
                pos);
    for (int h = 0; h < kHeads; ++h) {
      for (int i = 0; i < rope_dims / 2; ++i) {
        const int a = h * kHeadDim + (mode == RopeMode::kSplitHalves ? i : 2 * i);
        const int b = a + (mode == RopeMode::kSplitHalves ? rope_dims / 2 : 1);
        const double angle =
            pos * 0.125 * std::pow(double{base}, -2.0 * i / rope_dims) / factors[i];
        const double c = std::cos(angle), s = std::sin(angle);
        EXPECT_NEAR(ours[a], x[a] * c - x[b] * s, 2e-3) << "pair " << i;
        EXPECT_NEAR(ours[b], x[a] * s + x[b] * c, 2e-3) << "pair " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
