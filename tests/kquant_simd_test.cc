// The SIMD K-quant tiles (kquant_tiles.h) against the scalar tiles, bit for bit: raw random
// super-blocks (any bit pattern of quants, scales and mins, extreme quants, zero, negative and
// subnormal f16 scales) against Q8_K activation blocks with extreme quants (-128 included) and
// zero or negative scales, on every table, every m = 1..17, odd output ranges and misaligned rows;
// and the x16 layout of Q4_K, Q5_K and Q6_K (packed_kquants.h): packing gives every stored row back
// byte for byte, and the packed tiles give the scalar tiles' bits for every m and 16-aligned range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "support/kernel_tables.h"
#include "util/half.h"

namespace kvserve {
namespace {

constexpr GgmlType kKTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                GgmlType::kQ6_K};

// Byte offsets of a K-quant block's f16 fields (d, and dmin where the type has one).
std::vector<size_t> F16Fields(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::kQ3_K:
      return {offsetof(BlockQ3_K, d)};
    case GgmlType::kQ4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::kQ5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    default:
      return {offsetof(BlockQ6_K, d)};
  }
}

// A finite f16 scale: zero (either sign), subnormal, small or large, either sign.
uint16_t RandomScale(std::mt19937& rng) {
  const float choices[] = {0.0f, -0.0f, 6.0e-8f, -3.0e-6f, 1.0e-3f, -2.5e-2f, 0.75f, -1.5f, 3.0f};
  std::uniform_int_distribution<int> pick(0, 9);
  const int c = pick(rng);
  if (c == 9) return static_cast<uint16_t>(rng() & 0x7bff);  // any finite, sign bit clear
  return FloatToFp16(choices[c]);
}

struct RawProblem {
  GgmlType type;
  int m, n, k;
  size_t w_row, x_row;
  std::vector<uint8_t> w, x;  // rows start at byte 1: misaligned

  RawProblem(GgmlType type_in, int m_in, int n_in, int k_in, uint32_t seed)
      : type(type_in), m(m_in), n(n_in), k(k_in) {
    const size_t block_bytes = TraitsOf(type).block_bytes;
    const int n_blocks = k / 256;
    w_row = block_bytes * n_blocks;
    x_row = sizeof(BlockQ8_K) * n_blocks;
    w.resize(1 + w_row * n);
    x.resize(1 + x_row * m);
    std::mt19937 rng(seed);
    for (int j = 0; j < n; ++j) {
      for (int b = 0; b < n_blocks; ++b) {
        uint8_t* block = w.data() + 1 + w_row * j + block_bytes * b;
        const int kind = static_cast<int>(rng() % 4);  // random, all ones, all zeros, random
        for (size_t e = 0; e < block_bytes; ++e) {
          block[e] = kind == 1 ? 0xff : kind == 2 ? 0x00 : static_cast<uint8_t>(rng());
        }
        for (size_t f : F16Fields(type)) {
          const uint16_t s = RandomScale(rng);
          std::memcpy(block + f, &s, sizeof(s));
        }
      }
    }
    for (int i = 0; i < m; ++i) {
      for (int b = 0; b < n_blocks; ++b) {
        BlockQ8_K q{};
        const int kind = static_cast<int>(rng() % 4);  // random, all -128, all 127, random
        for (int e = 0; e < 256; ++e) {
          q.quants[e] = static_cast<int8_t>(kind == 1 ? -128 : kind == 2 ? 127 : rng());
        }
        for (int g = 0; g < 16; ++g) {
          int s = 0;
          for (int e = 16 * g; e < 16 * g + 16; ++e) s += q.quants[e];
          q.bsums[g] = static_cast<int16_t>(s);
        }
        const float ds[] = {0.0f, -0.0f, 1.0e-3f, -2.0e-2f, 0.5f, -1.0f};
        q.d = ds[rng() % 6];
        std::memcpy(x.data() + 1 + x_row * i + sizeof(BlockQ8_K) * b, &q, sizeof(q));
      }
    }
  }

  // The x16 layout of w (HasPackedLayout types only).
  std::vector<uint8_t> Packed() const {
    std::vector<uint8_t> packed(PackedMatrixBytes(type, n, k));
    PackGroups(type, w.data() + 1, w_row, n, k, 0, (n + 15) / 16, packed.data());
    return packed;
  }

  // y rows [i0, i0 + rows), outputs [n_begin, n_end), with the table's stored-layout tile, or with
  // its packed tile on `packed` when given.
  // `tile_fn` (packed only): a tile other than the table's packed one (a decode alternative).
  void Run(const KernelTable& table, int i0, int rows, int n_begin, int n_end,
           std::vector<float>& y, const std::vector<uint8_t>* packed = nullptr,
           MatmulTileFn tile_fn = nullptr) const {
    TileScratch scratch;
    const MatmulTile tile{
        .w = packed != nullptr ? packed->data() : w.data() + 1,
        .w_row_bytes = packed != nullptr ? PackedGroupBytes(type, k) : w_row,
        .x = x.data() + 1 + x_row * i0,
        .x_row_bytes = x_row,
        .m = rows,
        .k = k,
        .n_begin = n_begin,
        .n_end = n_end,
        .y = y.data() + static_cast<size_t>(i0) * n,
        .ldy = n,
        .scratch = &scratch,
    };
    if (tile_fn == nullptr) {
      tile_fn = packed != nullptr ? PackedMatmulFor(table, type) : MatmulFor(table, type);
    }
    tile_fn(tile);
  }
};

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(KquantSimdTest, RawBlocksGiveScalarBitsOnEveryTable) {
  const auto tables = testing::FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table on this CPU";
  for (GgmlType type : kKTypes) {
    SCOPED_TRACE(GgmlTypeName(type));
    for (int k : {256, 768}) {
      SCOPED_TRACE(k);
      const RawProblem p(type, 17, 37, k, 1000 + k + static_cast<int>(type));
      std::vector<float> want(static_cast<size_t>(p.m) * p.n);
      p.Run(ScalarKernels(), 0, p.m, 0, p.n, want);
      for (const KernelTable* table : tables) {
        SCOPED_TRACE(table->isa);
        for (int m = 1; m <= 17; ++m) {
          std::vector<float> got(want.size(), -1.0f);
          for (int i0 = 0; i0 < p.m; i0 += m) {
            const int rows = std::min(m, p.m - i0);
            p.Run(*table, i0, rows, 0, 3, got);
            p.Run(*table, i0, rows, 3, 3 + m, got);
            p.Run(*table, i0, rows, 3 + m, p.n, got);
          }
          for (size_t e = 0; e < want.size(); ++e) {
            ASSERT_TRUE(SameBits(got[e], want[e]))
                << "m " << m << " element " << e << ": " << got[e] << " vs " << want[e];
          }
        }
      }
    }
  }
}

TEST(KquantSimdTest, PackingGivesBackEveryStoredRow) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    ASSERT_TRUE(HasPackedLayout(type));
    const RawProblem p(type, 1, 37, 768, 99 + static_cast<int>(type));
    const std::vector<uint8_t> packed = p.Packed();
    std::vector<uint8_t> row(p.w_row);
    for (int j = 0; j < p.n; ++j) {
      UnpackRow(type, packed.data(), p.k, j, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), p.w.data() + 1 + p.w_row * j, p.w_row))
          << GgmlTypeName(type) << " row " << j;
    }
  }
}

TEST(KquantSimdTest, PackedTilesGiveScalarBits) {
  int tested = 0;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(GgmlTypeName(type));
    for (int k : {256, 1024}) {
      const RawProblem p(type, 17, 53, k, 2000 + k + static_cast<int>(type));
      const std::vector<uint8_t> packed = p.Packed();
      std::vector<float> want(static_cast<size_t>(p.m) * p.n);
      p.Run(ScalarKernels(), 0, p.m, 0, p.n, want);
      for (const KernelTable* table : testing::FastTables()) {
        if (PackedMatmulFor(*table, type) == nullptr) continue;
        SCOPED_TRACE(table->isa);
        // The table's tile, then its decode alternative (KernelTable::decode_q4_k_x16_alt ...).
        const MatmulTileFn alt = type == GgmlType::kQ4_K   ? table->decode_q4_k_x16_alt
                                 : type == GgmlType::kQ5_K ? table->decode_q5_k_x16_alt
                                                           : table->decode_q6_k_x16_alt;
        for (MatmulTileFn fn : {PackedMatmulFor(*table, type), alt}) {
          if (fn == nullptr) continue;
          SCOPED_TRACE(fn == alt ? "decode alternative" : "x16 tile");
          ++tested;
          for (int m = 1; m <= 17; ++m) {
            std::vector<float> got(want.size(), -1.0f);
            for (int i0 = 0; i0 < p.m; i0 += m) {
              const int rows = std::min(m, p.m - i0);
              p.Run(*table, i0, rows, 0, 16, got, &packed, fn);
              p.Run(*table, i0, rows, 16, 48, got, &packed, fn);
              p.Run(*table, i0, rows, 48, p.n, got, &packed, fn);
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
  if (tested == 0) GTEST_SKIP() << "no table with packed K-quant tiles on this CPU";
}

// The test can fail: the scalar results are not all zero (the blocks reach the outputs).
TEST(KquantSimdTest, RawProblemsAreNotTrivial) {
  for (GgmlType type : kKTypes) {
    const RawProblem p(type, 4, 9, 512, 7);
    std::vector<float> y(static_cast<size_t>(p.m) * p.n);
    p.Run(ScalarKernels(), 0, p.m, 0, p.n, y);
    EXPECT_GT(std::count_if(y.begin(), y.end(), [](float v) { return v != 0.0f; }), 10)
        << GgmlTypeName(type);
  }
}

}  // namespace
}  // namespace kvserve
