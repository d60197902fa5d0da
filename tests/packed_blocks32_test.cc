// The x16 layout of Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 (kernels/cpu/packed_blocks32.h): packing
// gives every stored row back byte for byte, and the packed tiles give the scalar tiles' bits for
// raw random blocks (any quant and qh bits, f16 scales of either sign, MXFP4's E8M0 bytes from 0
// (a denormal scale) to 255 (2^127, whose products overflow to infinity)) against activation
// blocks with extreme quants (-128 included) and any scales, for every m = 1..17 and 16-aligned
// ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "support/kernel_tables.h"
#include "util/half.h"

namespace kvserve {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL,
                               GgmlType::kMXFP4};

// An E8M0 byte: the edges (the denormal 2^-128 and 2^-127, the smallest normal, 1/2, 1, 2^127) or
// one near 1 (products of any size but neither underflowing nor overflowing), or any byte.
uint8_t RandomE8M0(std::mt19937& rng) {
  const uint8_t choices[] = {0, 1, 2, 127, 128, 255};
  const int c = static_cast<int>(rng() % 10);
  if (c < 6) return choices[c];
  if (c < 9) return static_cast<uint8_t>(110 + rng() % 36);
  return static_cast<uint8_t>(rng());
}

uint16_t RandomF16(std::mt19937& rng) {
  const float choices[] = {0.0f, -0.0f, 6.0e-8f, -3.0e-6f, 1.0e-3f, -2.5e-2f, 0.75f, -1.5f};
  const int c = static_cast<int>(rng() % 9);
  if (c == 8) return static_cast<uint16_t>(rng() & 0xfbff);  // finite, either sign
  return FloatToFp16(choices[c]);
}

struct Problem {
  GgmlType type;
  int m, n, k;
  size_t w_row, x_row;
  std::vector<uint8_t> w, x;

  Problem(GgmlType type_in, int m_in, int n_in, int k_in, uint32_t seed)
      : type(type_in), m(m_in), n(n_in), k(k_in) {
    std::mt19937 rng(seed);
    w_row = RowBytes(type, k);
    w.resize(w_row * n);
    for (uint8_t& byte : w) byte = static_cast<uint8_t>(rng());
    const size_t block = TraitsOf(type).block_bytes;
    const bool has_min = type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1;
    for (size_t b = 0; b < w.size() / block && type == GgmlType::kMXFP4; ++b) {
      w[block * b] = RandomE8M0(rng);  // e leads the block
    }
    for (size_t b = 0; b < w.size() / block && type != GgmlType::kMXFP4; ++b) {
      for (int f = 0; f < (has_min ? 2 : 1); ++f) {
        const uint16_t s = RandomF16(rng);
        std::memcpy(w.data() + block * b + 2 * f, &s, 2);  // d (and m) lead every block
      }
    }
    const GgmlType x_type = ActivationTypeFor(type);
    x_row = RowBytes(x_type, k);
    x.resize(x_row * m);
    const size_t x_block = TraitsOf(x_type).block_bytes;
    const size_t scales = x_type == GgmlType::kQ8_1 ? 2 : 1;
    for (size_t b = 0; b < x.size() / x_block; ++b) {
      uint8_t* xb = x.data() + x_block * b;
      const int kind = static_cast<int>(rng() % 4);  // random, all -128, all 127, random
      for (size_t e = 2 * scales; e < x_block; ++e) {
        xb[e] = kind == 1 ? 0x80 : kind == 2 ? 0x7f : static_cast<uint8_t>(rng());
      }
      for (size_t f = 0; f < scales; ++f) {
        const uint16_t s = RandomF16(rng);
        std::memcpy(xb + 2 * f, &s, 2);
      }
    }
  }

  std::vector<uint8_t> Packed() const {
    std::vector<uint8_t> packed(PackedMatrixBytes(type, n, k));
    PackGroups(type, w.data(), w_row, n, k, 0, (n + 15) / 16, packed.data());
    return packed;
  }

  void Run(MatmulTileFn fn, const uint8_t* weights, size_t w_row_bytes, int i0, int rows,
           int n_begin, int n_end, std::vector<float>& y) const {
    TileScratch scratch;
    fn({.w = weights,
        .w_row_bytes = w_row_bytes,
        .x = x.data() + x_row * i0,
        .x_row_bytes = x_row,
        .m = rows,
        .k = k,
        .n_begin = n_begin,
        .n_end = n_end,
        .y = y.data() + static_cast<size_t>(i0) * n,
        .ldy = n,
        .scratch = &scratch});
  }
};

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(PackedBlocks32Test, PackingGivesBackEveryStoredRow) {
  for (GgmlType type : kTypes) {
    ASSERT_TRUE(HasPackedLayout(type)) << GgmlTypeName(type);
    const Problem p(type, 1, 37, 96, 5 + static_cast<int>(type));
    const std::vector<uint8_t> packed = p.Packed();
    std::vector<uint8_t> row(p.w_row);
    for (int j = 0; j < p.n; ++j) {
      UnpackRow(type, packed.data(), p.k, j, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), p.w.data() + p.w_row * j, p.w_row))
          << GgmlTypeName(type) << " row " << j;
    }
  }
}

TEST(PackedBlocks32Test, PackedTilesGiveScalarBits) {
  int tested = 0;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    for (int k : {32, 96, 256, 288}) {  // 288: whole bundles and a part (MXFP4: 4 a bundle)
      const Problem p(type, 17, 53, k, 300 + k + static_cast<int>(type));
      const std::vector<uint8_t> packed = p.Packed();
      std::vector<float> want(static_cast<size_t>(p.m) * p.n);
      p.Run(MatmulFor(ScalarKernels(), type), p.w.data(), p.w_row, 0, p.m, 0, p.n, want);
      ASSERT_GT(std::count_if(want.begin(), want.end(), [](float v) { return v != 0.0f; }), 100);
      for (const KernelTable* table : testing::FastTables()) {
        // The table's tile, then its decode alternative (KernelTable::decode_q4_1_x16_l2 ...).
        for (const MatmulTileFn fn :
             {PackedMatmulFor(*table, type), DecodeAlternativeFor(*table, type, true)}) {
          if (fn == nullptr) continue;
          SCOPED_TRACE(std::string(table->isa) +
                       (fn == PackedMatmulFor(*table, type) ? " x16 tile" : " decode alternative"));
          ++tested;
          const size_t group_bytes = PackedGroupBytes(type, k);
          for (int m = 1; m <= 17; ++m) {
            std::vector<float> got(want.size(), -1.0f);
            for (int i0 = 0; i0 < p.m; i0 += m) {
              const int rows = std::min(m, p.m - i0);
              p.Run(fn, packed.data(), group_bytes, i0, rows, 0, 16, got);
              p.Run(fn, packed.data(), group_bytes, i0, rows, 16, 48, got);
              p.Run(fn, packed.data(), group_bytes, i0, rows, 48, p.n, got);
            }
            for (size_t e = 0; e < want.size(); ++e) {
              ASSERT_TRUE(SameBits(got[e], want[e])) << "k " << k << " m " << m << " element " << e
                                                     << ": " << got[e] << " vs " << want[e];
            }
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no table with these packed tiles on this CPU";
}

}  // namespace
}  // namespace kvserve
