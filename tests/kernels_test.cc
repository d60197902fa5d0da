// Every SIMD kernel table this build compiled and this CPU runs, against the scalar twins:
// - matmuls over sweeps of k, m and odd n ranges, with misaligned weights and activations, within a
//   tolerance derived from the float arithmetic (see Tolerance below);
// - batch invariance: bit-identical outputs whatever m, the n range or the row block;
// - quantize_row_q8_0 bit-identical to the scalar one;
// - dot_f32 for n = 0..70.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/float_matmul.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "support/kernel_tables.h"
#include "util/half.h"

namespace kvserve {
namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();

// The fast tables to test: every ISA compiled into this build that this CPU supports.
using ::kvserve::testing::FastTables;

// All tables, the scalar one included (for the invariance tests).
std::vector<const KernelTable*> AllTables() {
  std::vector<const KernelTable*> tables = {&ScalarKernels()};
  for (const KernelTable* t : FastTables()) tables.push_back(t);
  return tables;
}

bool IsBlockType(GgmlType type) { return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0; }

constexpr GgmlType kTypes[] = {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                               GgmlType::kQ4_0};

// A byte buffer whose data starts `offset` bytes past a 64-byte boundary.
class OffsetBuffer {
 public:
  OffsetBuffer(size_t bytes, size_t offset) : storage_(bytes + 128), offset_(offset) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    start_ = ((64 - base % 64) % 64) + offset_;
  }
  uint8_t* data() { return storage_.data() + start_; }

 private:
  std::vector<uint8_t> storage_;
  size_t offset_;
  size_t start_ = 0;
};

// One matmul problem: n weight rows and m activation rows of length k, with both stored twice: in
// aligned buffers with packed rows (for the scalar reference) and in buffers misaligned by a few
// bytes with padded row strides (for the fast kernel).
struct Problem {
  GgmlType type;
  int m, n, k;
  std::vector<float> w_float;  // [n][k] as dequantized (what the weights really hold)
  std::vector<float> x_float;  // [m][k] as the kernel sees them (dequantized for block types)
  std::vector<uint8_t> w_ref, x_ref;
  size_t w_row, x_row;  // packed row bytes
  OffsetBuffer w_fast, x_fast;
  size_t w_stride, x_stride;  // padded row bytes of the fast copies

  Problem(GgmlType type_in, int m_in, int n_in, int k_in, uint32_t seed, size_t w_offset,
          size_t x_offset)
      : type(type_in),
        m(m_in),
        n(n_in),
        k(k_in),
        w_row(RowBytes(type_in, k_in)),
        x_row(IsBlockType(type_in) ? RowBytes(GgmlType::kQ8_0, k_in) : sizeof(float) * k_in),
        w_fast((w_row + 7) * n_in, w_offset),
        x_fast((x_row + 12) * m_in, x_offset),
        w_stride(w_row + 3),
        x_stride(x_row + (IsBlockType(type_in) ? 5 : 12)) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(k);
    w_ref.resize(w_row * n);
    w_float.resize(static_cast<size_t>(n) * k);
    for (int j = 0; j < n; ++j) {
      for (float& v : row) v = dist(rng);
      QuantizeRow(type, row.data(), k, w_ref.data() + w_row * j);
      DequantizeRow(type, w_ref.data() + w_row * j, k, w_float.data() + static_cast<size_t>(j) * k);
      std::memcpy(w_fast.data() + w_stride * j, w_ref.data() + w_row * j, w_row);
    }
    x_ref.resize(x_row * m);
    x_float.resize(static_cast<size_t>(m) * k);
    for (int i = 0; i < m; ++i) {
      for (float& v : row) v = dist(rng);
      uint8_t* dst = x_ref.data() + x_row * i;
      if (IsBlockType(type)) {
        ScalarKernels().quantize_row_q8_0(row.data(), k, reinterpret_cast<BlockQ8_0*>(dst));
        DequantizeRow(GgmlType::kQ8_0, dst, k, x_float.data() + static_cast<size_t>(i) * k);
      } else {
        std::memcpy(dst, row.data(), x_row);
        std::memcpy(x_float.data() + static_cast<size_t>(i) * k, row.data(), x_row);
      }
      std::memcpy(x_fast.data() + x_stride * i, dst, x_row);
    }
  }

  // Runs `table` (its tile for the type, or `tile`) on rows [i0, i0 + rows) and weight rows
  // [n_begin, n_end) into y (ldy = n + 3).
  void Run(const KernelTable& table, bool fast_copy, int i0, int rows, int n_begin, int n_end,
           float* y, MatmulTileFn tile = nullptr) {
    const MatmulTileFn fn = tile != nullptr ? tile : MatmulFor(table, type);
    ASSERT_NE(fn, nullptr);
    TileScratch scratch;
    MatmulTile tile{
        .w = fast_copy ? w_fast.data() : w_ref.data(),
        .w_row_bytes = fast_copy ? w_stride : w_row,
        .x = (fast_copy ? x_fast.data() : x_ref.data()) + (fast_copy ? x_stride : x_row) * i0,
        .x_row_bytes = fast_copy ? x_stride : x_row,
        .m = rows,
        .k = k,
        .n_begin = n_begin,
        .n_end = n_end,
        .y = y + static_cast<size_t>(i0) * Ldy(),
        .ldy = Ldy(),
        .scratch = &scratch,
    };
    fn(tile);
  }

  int Ldy() const { return n + 3; }

  // sum_k |w * x| for one output, in double.
  double AbsDot(int i, int j) const {
    double s = 0;
    for (int kk = 0; kk < k; ++kk) {
      s += std::fabs(static_cast<double>(w_float[static_cast<size_t>(j) * k + kk]) *
                     x_float[static_cast<size_t>(i) * k + kk]);
    }
    return s;
  }

  // |fast - ref| <= c * terms * eps * sum|w x| with c = 1: each side's rounding error is at most
  // (terms - 1) * eps / 2 * sum|w x| for any summation order of `terms` rounded additions, plus one
  // rounding per product. Float types add k products; block types add exact integer block sums,
  // each scaled by dw * dx (two more roundings per block), and the SIMD lanes add a reduction
  // tree of at most 16 more terms.
  double Tolerance(int i, int j) const {
    const double terms = IsBlockType(type) ? 3.0 * (k / 32) + 16 : k + 16;
    return terms * kEps * AbsDot(i, j) + std::numeric_limits<float>::denorm_min();
  }
};

std::vector<int> KSweep(GgmlType type) {
  std::vector<int> ks;
  if (IsBlockType(type)) {
    for (int b = 1; b <= 31; ++b) ks.push_back(32 * b);
  } else {
    ks = {1,  2,  3,  7,  8,  9,   15,  16,  17,  31,  32,  33,  47,   63,
          64, 65, 95, 96, 97, 127, 128, 129, 255, 256, 257, 511, 1000, 1023};
  }
  return ks;
}

constexpr int kMs[] = {1, 2, 3, 4, 5, 7, 8, 9, 17};

TEST(KernelsTest, TablesAreComplete) {
  for (const KernelTable* t : AllTables()) {
    SCOPED_TRACE(t->isa);
    for (GgmlType type : kTypes) EXPECT_NE(MatmulFor(*t, type), nullptr);
    EXPECT_NE(t->quantize_row_q8_0, nullptr);
    EXPECT_NE(t->dot_f32, nullptr);
  }
  if (CpuSupportsAvx512()) {
    EXPECT_NE(Avx512Kernels(), nullptr) << "avx512 not compiled";
  }
  if (CpuSupportsAvx2()) {
    EXPECT_NE(Avx2Kernels(), nullptr) << "avx2 not compiled";
  }
  if (CpuSupportsAvxVnni()) {
    EXPECT_NE(AvxVnniKernels(), nullptr) << "avxvnni not compiled";
  }
  if (CpuSupportsAmx()) {
    EXPECT_NE(AmxKernels(), nullptr) << "amx not compiled";
  }
}

// Fast matmuls against the scalar twin, on misaligned copies, over the sweeps.
TEST(KernelsTest, MatmulMatchesScalar) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  const int n = 24, n_begin = 3, n_end = 21;
  uint32_t seed = 1;
  for (GgmlType type : kTypes) {
    for (int k : KSweep(type)) {
      for (int m : kMs) {
        ++seed;
        Problem p(type, m, n, k, seed, 1 + seed % 7, 2 + seed % 5);
        const size_t y_size = static_cast<size_t>(m) * p.Ldy();
        std::vector<float> ref(y_size, 0.0f);
        p.Run(ScalarKernels(), false, 0, m, n_begin, n_end, ref.data());
        for (const KernelTable* t : tables) {
          SCOPED_TRACE(std::string(t->isa) + " " + GgmlTypeName(type) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m));
          std::vector<float> y(y_size, std::numeric_limits<float>::quiet_NaN());
          p.Run(*t, true, 0, m, n_begin, n_end, y.data());
          int failures = 0;
          for (int i = 0; i < m && failures < 5; ++i) {
            for (int j = 0; j < p.Ldy(); ++j) {
              const float got = y[static_cast<size_t>(i) * p.Ldy() + j];
              if (j < n_begin || j >= n_end) {
                EXPECT_TRUE(std::isnan(got)) << "wrote outside the range at " << i << "," << j;
                continue;
              }
              const float want = ref[static_cast<size_t>(i) * p.Ldy() + j];
              const double tol = p.Tolerance(i, j);
              if (!(std::fabs(static_cast<double>(got) - want) <= tol)) {
                ADD_FAILURE() << "y[" << i << "][" << j << "] = " << got << ", scalar " << want
                              << ", tolerance " << tol;
                ++failures;
              }
            }
          }
        }
      }
    }
  }
}

bool SameBits(const float* a, const float* b, size_t count) {
  return std::memcmp(a, b, sizeof(float) * count) == 0;
}

// One m = 9 call against: each row alone (m = 1), split n ranges, and row subsets starting at odd
// rows. All must give the same bits.
void CheckBatchInvariance(const KernelTable& t, GgmlType type, int k, int m, int n) {
  SCOPED_TRACE(std::string(t.isa) + " " + GgmlTypeName(type) + " k=" + std::to_string(k));
  Problem p(type, m, n, k, 1234 + k, 3, 1);
  const size_t y_size = static_cast<size_t>(m) * p.Ldy();
  std::vector<float> batch(y_size, 0.0f);
  p.Run(t, true, 0, m, 0, n, batch.data());

  std::vector<float> single(y_size, 0.0f);
  for (int i = 0; i < m; ++i) p.Run(t, true, i, 1, 0, n, single.data());
  EXPECT_TRUE(SameBits(batch.data(), single.data(), y_size)) << "m = 1 rows differ from the batch";

  std::vector<float> split(y_size, 0.0f);
  const int cuts[] = {0, 1, std::min(6, n), std::min(13, n), std::min(14, n), n};
  for (int c = 0; c + 1 < 6; ++c) p.Run(t, true, 0, m, cuts[c], cuts[c + 1], split.data());
  EXPECT_TRUE(SameBits(batch.data(), split.data(), y_size)) << "split n ranges differ";

  std::vector<float> subsets(y_size, 0.0f);
  p.Run(t, true, 0, 3, 0, n, subsets.data());
  p.Run(t, true, 3, 5, 0, 7, subsets.data());
  p.Run(t, true, 3, 5, 7, n, subsets.data());
  p.Run(t, true, 8, m - 8, 0, n, subsets.data());
  EXPECT_TRUE(SameBits(batch.data(), subsets.data(), y_size)) << "row subsets differ";
}

TEST(KernelsTest, MatmulIsBatchInvariant) {
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : kTypes) {
      for (int k : {96, 160, 1000, 1024}) {
        if (IsBlockType(type) && k % 32 != 0) continue;
        CheckBatchInvariance(*t, type, k, 9, 37);
      }
    }
  }
}

// The float decode tiles with their prefetches into L2 (KernelTable::decode_f16_l2 ...): the
// table's own tile's bits, one row or several, every k and output range.
TEST(KernelsTest, FloatDecodeAlternativesGiveTheTableTilesBits) {
  int tested = 0;
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
      const MatmulTileFn alt = DecodeAlternativeFor(*t, type, false);
      if (alt == nullptr) continue;
      ++tested;
      for (int k : KSweep(type)) {
        for (int m : {1, 2, 7}) {
          SCOPED_TRACE(std::string(t->isa) + " " + GgmlTypeName(type) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m));
          const int n = 45;  // 5 decode tiles of 8 rows and a partial one
          Problem p(type, m, n, k, 77 + k, 3, 1);
          const size_t y_size = static_cast<size_t>(m) * p.Ldy();
          std::vector<float> want(y_size, 0.0f), got(y_size, 0.0f);
          p.Run(*t, true, 0, m, 0, n, want.data());
          p.Run(*t, true, 0, m, 0, 19, got.data(), alt);
          p.Run(*t, true, 0, m, 19, n, got.data(), alt);
          ASSERT_TRUE(SameBits(want.data(), got.data(), y_size));
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no table with float decode alternatives on this CPU";
}

// Prefill-sized batches take the packed float path (k blocks, spilled accumulators, padded tiles);
// every row must still match its m = 1 result bit for bit. The last k is past one k block.
TEST(KernelsTest, MatmulIsBatchInvariantForPrefillBatches) {
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
      for (int k : {17, 1000, 1040, 2100, avx512::kPanelKBlockFloats + 23}) {
        CheckBatchInvariance(*t, type, k, 40, 37);
      }
    }
  }
}

// Every partial register tile of the packed float path: 1 to 6 rows in the last row tile
// (m = 16 .. 21) and 1 to 4 weight rows in the last weight tile (n = 37 .. 40).
TEST(KernelsTest, MatmulIsBatchInvariantForPartialPackedTiles) {
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
      for (int m = 16; m <= 21; ++m) {
        for (int n = 37; n <= 40; ++n) CheckBatchInvariance(*t, type, 768, m, n);
      }
    }
  }
}

// Activation rows that start on 64-byte boundaries and are whole 16-float vectors are read in place
// by the packed float path instead of being copied: same bits as the copied (misaligned) layout,
// for every partial row tile and a k that ends in a short k block (one vector past a block).
TEST(KernelsTest, MatmulInPlaceActivationsMatchCopiedOnes) {
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
      for (int k : {768, avx512::kPanelKBlockFloats + 16}) {
        for (int m : {16, 17, 18, 19, 20, 21, 40}) {
          SCOPED_TRACE(std::string(t->isa) + " " + GgmlTypeName(type) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m));
          const int n = 39;
          Problem p(type, m, n, k, 99 + m, 3, 1);
          const size_t y_size = static_cast<size_t>(m) * p.Ldy();
          std::vector<float> copied(y_size, 0.0f);
          p.Run(*t, true, 0, m, 0, n, copied.data());
          OffsetBuffer aligned_x(p.x_row * m, 0);  // rows of 4 k bytes, a multiple of 64
          std::memcpy(aligned_x.data(), p.x_ref.data(), p.x_row * m);
          std::vector<float> in_place(y_size, 0.0f);
          TileScratch scratch;
          const MatmulTile tile{
              .w = p.w_fast.data(),
              .w_row_bytes = p.w_stride,
              .x = aligned_x.data(),
              .x_row_bytes = p.x_row,
              .m = m,
              .k = k,
              .n_begin = 0,
              .n_end = n,
              .y = in_place.data(),
              .ldy = p.Ldy(),
              .scratch = &scratch,
          };
          MatmulFor(*t, type)(tile);
          EXPECT_TRUE(SameBits(copied.data(), in_place.data(), y_size));
        }
      }
    }
  }
}

// Long rows make the kernels split the activations into several row blocks.
TEST(KernelsTest, MatmulIsBatchInvariantAcrossRowBlocks) {
  for (const KernelTable* t : AllTables()) {
    for (GgmlType type : kTypes) CheckBatchInvariance(*t, type, 32768, 17, 9);
  }
}

TEST(KernelsTest, QuantizeRowMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int k = 32; k <= 1024; k += 32) {
    std::vector<float> x(k + 1);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    for (float& v : x) v = dist(rng) * scale;
    // Block 0: halves (ties) once amax = 127 makes the scale exactly 1. Block 1 (if any): zeros.
    for (int j = 0; j < 32; ++j) x[j + 1] = static_cast<float>(j - 16) + 0.5f;
    x[1] = 127.0f;
    if (k >= 64) std::fill(x.begin() + 33, x.begin() + 65, 0.0f);
    if (k >= 96) x[70] = -1e-6f;      // a scale in the f16 subnormal range
    const float* row = x.data() + 1;  // misaligned by one float
    const int blocks = k / 32;
    std::vector<BlockQ8_0> want(blocks), got(blocks);
    ScalarKernels().quantize_row_q8_0(row, k, want.data());
    for (const KernelTable* t : tables) {
      SCOPED_TRACE(std::string(t->isa) + " k=" + std::to_string(k));
      std::memset(got.data(), 0xab, sizeof(BlockQ8_0) * blocks);
      t->quantize_row_q8_0(row, k, got.data());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(BlockQ8_0) * blocks), 0);
    }
  }
}

// Every table's activation quantizer `fn` writes the scalar table's bytes for `row` (k floats),
// whatever the output held before.
template <typename Block>
void ExpectEveryTableQuantizesAsScalar(void (*KernelTable::*fn)(const float*, int, Block*),
                                       const float* row, int k) {
  const size_t n_blocks = static_cast<size_t>(k) / (sizeof(Block::quants) / sizeof(int8_t));
  std::vector<Block> want(n_blocks), got(n_blocks);
  std::memset(want.data(), 0xcd, sizeof(Block) * n_blocks);
  (ScalarKernels().*fn)(row, k, want.data());
  for (const KernelTable* t : AllTables()) {
    SCOPED_TRACE(t->isa);
    std::memset(got.data(), 0xab, sizeof(Block) * n_blocks);
    (t->*fn)(row, k, got.data());
    for (size_t b = 0; b < n_blocks; ++b) {
      EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(Block)), 0) << "block " << b;
    }
  }
}

// Q8_1 activation rows (Q4_1's and Q5_1's): every table gives the scalar encoder's bytes (d, s =
// f16(d * Σ q), quants), on random blocks of every scale and on blocks made to hit each rule:
// halves once the scale is exactly 1, zeros of both signs, a subnormal maximum, a maximum whose
// f16 overflows, NaN (ignored by the maximum, quantized to 0), infinities, an all-NaN block.
TEST(KernelsTest, QuantizeRowQ8_1MatchesScalarBitwise) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  constexpr int kBlocks = 24;
  const int k = 32 * kBlocks;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(k + 1);
  for (int trial = 0; trial < 60; ++trial) {
    for (int j = 0; j < k; ++j) {
      x[1 + j] = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 80) - 40 + j / 32 % 3);
    }
    float* row = x.data() + 1;  // misaligned by one float
    for (int j = 0; j < 32; ++j) row[j] = static_cast<float>(j % 31 - 15) + 0.5f;
    row[trial % 32] = trial % 2 ? 127.0f : -127.0f;           // block 0: id = 1, ties
    std::fill(row + 32, row + 64, trial % 2 ? 0.0f : -0.0f);  // block 1: zeros
    std::fill(row + 64, row + 96, 0.0f);                      // block 2: subnormal max
    row[64 + trial % 32] = 1e-45f;
    row[96 + trial % 32] = 1e38f;                    // block 3: d * Σq overflows
    row[128 + trial % 32] = nan;                     // block 4: one NaN
    row[160 + trial % 32] = trial % 3 ? inf : -inf;  // block 5: an infinity
    std::fill(row + 192, row + 224, nan);            // block 6: all NaN
    SCOPED_TRACE("trial " + std::to_string(trial));
    ExpectEveryTableQuantizesAsScalar(&KernelTable::quantize_row_q8_1, row, k);
  }
  // The rules on the scalar encoder: block 0's scale is 1 (127 / 127), so its quants are the
  // values rounded to even; the all-NaN block is all zeros.
  std::vector<BlockQ8_1> blocks(kBlocks);
  ScalarKernels().quantize_row_q8_1(x.data() + 1, k, blocks.data());
  EXPECT_EQ(blocks[0].d, FloatToFp16(1.0f));
  EXPECT_EQ(blocks[0].quants[1], -14);  // -13.5 rounds to even
  EXPECT_EQ(blocks[6].d, 0);
  for (int8_t q : blocks[6].quants) EXPECT_EQ(q, 0);
}

// Q8_K activation rows (the K-quants'): every table gives the scalar encoder's bytes, on random
// blocks of every scale and on blocks made to hit each rule: the first of two opposite-sign
// maxima, halves once the scale is exactly 1, zeros, a subnormal maximum (an infinite iscale),
// huge values, NaN and infinities.
TEST(KernelsTest, QuantizeRowQ8KMatchesScalarBitwise) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  constexpr int kBlocks = 12;
  const int k = 256 * kBlocks;
  std::vector<float> x(k + 1);
  for (int trial = 0; trial < 40; ++trial) {
    for (int b = 0; b < kBlocks; ++b) {
      const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
      for (int j = 0; j < 256; ++j) x[1 + 256 * b + j] = dist(rng) * scale;
    }
    float* row = x.data() + 1;  // misaligned by one float
    row[3] = -5.0f;             // block 0: -5 first, then +5: max is -5
    row[200] = 5.0f;
    for (int j = 0; j < 256; ++j) row[256 + j] = static_cast<float>(j % 253 - 126) + 0.5f;
    row[256 + 7] = -127.0f;  // block 1: iscale exactly 1, every other value a tie
    std::fill(row + 512, row + 768, trial % 2 ? 0.0f : -0.0f);  // block 2: zeros
    std::fill(row + 768, row + 1024, 0.0f);                     // block 3: a subnormal maximum
    row[768 + 9] = 1e-45f;
    row[768 + 10] = -1e-45f;
    row[1024 + 17] = 3e38f;                                             // block 4: huge
    row[1280 + trial % 256] = std::numeric_limits<float>::quiet_NaN();  // block 5: NaN
    row[1536 + 5] = std::numeric_limits<float>::infinity();             // block 6: infinities
    row[1536 + 6] = -std::numeric_limits<float>::infinity();
    SCOPED_TRACE("trial " + std::to_string(trial));
    ExpectEveryTableQuantizesAsScalar(&KernelTable::quantize_row_q8_k, row, k);
  }
  // The rules themselves, on the scalar encoder: block 0's scale comes from -5, block 1's is 1.
  std::vector<BlockQ8_K> blocks(kBlocks);
  ScalarKernels().quantize_row_q8_k(x.data() + 1, k, blocks.data());
  EXPECT_EQ(blocks[0].d, 1.0f / (-127.0f / -5.0f));
  EXPECT_EQ(blocks[1].d, 1.0f);
  EXPECT_EQ(blocks[2].d, 0.0f);
}

TEST(KernelsTest, DotMatchesScalar) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int n = 0; n <= 70; ++n) {
    std::vector<float> a(n + 3), b(n + 3);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const float* pa = a.data() + 1;
    const float* pb = b.data() + 2;
    const float want = ScalarKernels().dot_f32(pa, pb, n);
    double abs_sum = 0;
    for (int i = 0; i < n; ++i) abs_sum += std::fabs(static_cast<double>(pa[i]) * pb[i]);
    // Both sides: at most n + 16 rounded additions (see Problem::Tolerance), c = 1.
    const double tol = (n + 16) * kEps * abs_sum;
    for (const KernelTable* t : tables) {
      SCOPED_TRACE(std::string(t->isa) + " n=" + std::to_string(n));
      const float got = t->dot_f32(pa, pb, n);
      EXPECT_LE(std::fabs(static_cast<double>(got) - want), tol) << got << " vs " << want;
      if (n == 0) {
        EXPECT_EQ(got, 0.0f);
      }
    }
  }
}

TEST(KernelsTest, GeluMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  // Every f16 value, the floats just above and below it (rounding ties and near-ties), random
  // floats around the +-10 cut-offs, and the special values.
  std::vector<float> input;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = Fp16ToFloat(static_cast<uint16_t>(h));
    input.push_back(v);
    input.push_back(std::nextafter(v, INFINITY));
    input.push_back(std::nextafter(v, -INFINITY));
  }
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  for (int i = 0; i < 10000; ++i) input.push_back(dist(rng));
  for (float v :
       {10.0f, -10.0f, std::nextafter(10.0f, 0.0f), std::nextafter(-10.0f, 0.0f), 0.0f, -0.0f,
        INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 65520.0f, 1e-8f, -1e-8f}) {
    input.push_back(v);
  }
  input.push_back(1.0f);  // an odd length leaves a partial vector
  std::vector<float> want = input;
  ScalarKernels().gelu_f16_table(GeluF16Table(), want.data(), static_cast<int>(want.size()));
  for (const KernelTable* t : tables) {
    SCOPED_TRACE(t->isa);
    std::vector<float> got(input.size() + 8, 5.0f);
    std::copy(input.begin(), input.end(), got.begin());
    t->gelu_f16_table(GeluF16Table(), got.data(), static_cast<int>(input.size()));
    for (size_t i = 0; i < input.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << "x = " << input[i] << ": " << got[i] << " vs " << want[i];
    }
    for (size_t i = input.size(); i < got.size(); ++i) EXPECT_EQ(got[i], 5.0f) << "wrote past n";
  }
}

TEST(KernelsTest, SwiGluMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  // Ordinary values, both ends of KvExp's range (|g| near 87-88 and beyond), tiny and special
  // values; an odd length leaves a partial vector.
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  std::vector<float> gate, up;
  for (int i = 0; i < 5000; ++i) gate.push_back(i % 2 == 0 ? normal(rng) : wide(rng));
  for (float v : {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 89.0f, -89.0f, 1e-30f, -1e-30f, 1e-45f,
                  3e38f, -3e38f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN()}) {
    gate.push_back(v);
  }
  for (size_t i = 0; i < gate.size(); ++i) up.push_back(normal(rng));
  std::vector<float> want = gate;
  ScalarKernels().swiglu(want.data(), up.data(), static_cast<int>(want.size()));
  for (const KernelTable* t : tables) {
    SCOPED_TRACE(t->isa);
    for (int n : {static_cast<int>(gate.size()), 1, 7, 15, 17}) {
      std::vector<float> got(static_cast<size_t>(n) + 8, 5.0f);
      std::copy(gate.begin(), gate.begin() + n, got.begin());
      t->swiglu(got.data(), up.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
            << "gate = " << gate[i] << ", up = " << up[i] << ": " << got[i] << " vs " << want[i];
      }
      for (size_t i = n; i < got.size(); ++i) EXPECT_EQ(got[i], 5.0f) << "wrote past n";
    }
  }
}

TEST(KernelsTest, SwiGluIsCloseToTheExactFunction) {
  // silu(g) * up against double precision: the error is KvExp's (about 2e-7) plus three roundings.
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
  std::vector<float> gate(10000), up(10000, 1.5f);
  for (float& g : gate) g = dist(rng);
  std::vector<float> got = gate;
  ScalarKernels().swiglu(got.data(), up.data(), static_cast<int>(got.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * 1.5;
    EXPECT_NEAR(got[i], want, 6e-7 * std::abs(want) + 1e-30) << "gate = " << gate[i];
  }
  std::vector<float> big = {100.0f, -100.0f};
  std::vector<float> one = {1.0f, 1.0f};
  ScalarKernels().swiglu(big.data(), one.data(), 2);
  EXPECT_EQ(big[0], 100.0f);            // exp(-100) is 0: silu(g) = g
  EXPECT_LE(std::abs(big[1]), 1e-35f);  // exp(88) caps the denominator: about -6e-37
}

}  // namespace
}  // namespace kvserve
