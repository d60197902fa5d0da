// The x16 layout of F32, F16 and BF16 matrices (packed_floats.h): the packed tiles give the stored
// layout's bits at every activation row count (decode, the few-row tiles, the prefill panels),
// every output range and every row length, and a packed row unpacks to the stored one. (Whole
// float files, packed or not: packed_weights_test.cc.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/float_matmul.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "support/kernel_tables.h"

namespace kvserve {
namespace {

constexpr GgmlType kFloatTypes[] = {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16};

// Bytes in a 64-byte aligned buffer (the tiles load whole vectors).
struct AlignedBytes {
  explicit AlignedBytes(size_t n)
      : bytes(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64)), &std::free),
        size(n) {
    std::memset(bytes.get(), 0, (n + 63) / 64 * 64 + 64);
  }
  uint8_t* data() const { return bytes.get(); }
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes;
  size_t size;
};

AlignedBytes StoredMatrix(GgmlType type, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(n_in);
  const size_t row_bytes = RowBytes(type, n_in);
  AlignedBytes w(row_bytes * n_out);
  for (int j = 0; j < n_out; ++j) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(type, row.data(), n_in, w.data() + row_bytes * j);
  }
  return w;
}

AlignedBytes Packed(GgmlType type, const AlignedBytes& stored, int n_out, int n_in) {
  AlignedBytes packed(PackedMatrixBytes(type, n_out, n_in));
  PackGroups(type, stored.data(), RowBytes(type, n_in), n_out, n_in, 0,
             (n_out + kPackRows - 1) / kPackRows, packed.data());
  return packed;
}

std::vector<float> RunTile(MatmulTileFn fn, const uint8_t* w, size_t w_row_bytes,
                           const std::vector<float>& x, int m, int k, int n_begin, int n_end,
                           int n) {
  return testing::RunTile(fn, w, w_row_bytes, reinterpret_cast<const uint8_t*>(x.data()),
                          sizeof(float) * static_cast<size_t>(k), m, k, n_begin, n_end, n);
}

TEST(PackedFloatsTest, RowsUnpackToTheStoredBytesAndPaddingIsZero) {
  for (GgmlType type : kFloatTypes) {
    for (int k : {5, 16, 40, 1047}) {
      SCOPED_TRACE(std::string(GgmlTypeName(type)) + " k=" + std::to_string(k));
      const int n = 45;
      const AlignedBytes stored = StoredMatrix(type, n, k, 3 + k);
      const AlignedBytes packed = Packed(type, stored, n, k);
      std::vector<uint8_t> row(RowBytes(type, k));
      for (int j = 0; j < n; ++j) {
        UnpackRow(type, packed.data(), k, j, row.data());
        ASSERT_EQ(std::memcmp(row.data(), stored.data() + RowBytes(type, k) * j, row.size()), 0)
            << "row " << j;
      }
      // Past k in every row, and rows 45..47 of the last group: zero bytes.
      const size_t element = RowBytes(type, 1);
      const size_t group_bytes = PackedGroupBytes(type, k);
      const int vectors = (k + 15) / 16;
      for (int j = 0; j < 48; ++j) {
        const uint8_t* group = packed.data() + (j / 16) * group_bytes;
        for (int e = 0; e < 16 * vectors; ++e) {
          if (j < n && e < k) continue;
          const uint8_t* at = group + ((e / 16) * 16 + j % 16) * 16 * element + (e % 16) * element;
          for (size_t b = 0; b < element; ++b) ASSERT_EQ(at[b], 0) << "row " << j << " elt " << e;
        }
      }
    }
  }
}

TEST(PackedFloatsTest, PackedTilesGiveTheStoredTilesBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int tested = 0;
  for (const KernelTable* table : testing::FastTables()) {
    for (GgmlType type : kFloatTypes) {
      const MatmulTileFn packed_fn = PackedMatmulFor(*table, type);
      if (packed_fn == nullptr) continue;
      const MatmulTileFn alt = DecodeAlternativeFor(*table, type, true);
      ASSERT_NE(alt, nullptr) << table->isa << " " << GgmlTypeName(type);
      ++tested;
      // The last two: one vector and a part past one k block of the prefill panels.
      for (int k :
           {5, 16, 40, 1047, avx512::kPanelKBlockFloats + 16, avx512::kPanelKBlockFloats + 23}) {
        const int n = 45;  // two groups and 13 rows
        const AlignedBytes stored = StoredMatrix(type, n, k, 11 + k);
        const AlignedBytes packed = Packed(type, stored, n, k);
        for (int m : {1, 2, 3, 5, 6, 7, 13, 16, 17, 40}) {
          std::vector<float> x(static_cast<size_t>(m) * k);
          for (float& v : x) v = dist(rng);
          for (auto [n_begin, n_end] : {std::pair{0, n}, {16, n}, {0, 16}, {32, 33}, {32, 45}}) {
            SCOPED_TRACE(std::string(table->isa) + " " + GgmlTypeName(type) +
                         " k=" + std::to_string(k) + " m=" + std::to_string(m) + " n=[" +
                         std::to_string(n_begin) + "," + std::to_string(n_end) + ")");
            const std::vector<float> want = RunTile(MatmulFor(*table, type), stored.data(),
                                                    RowBytes(type, k), x, m, k, n_begin, n_end, n);
            for (MatmulTileFn fn : {packed_fn, alt}) {
              const std::vector<float> got =
                  RunTile(fn, packed.data(), PackedGroupBytes(type, k), x, m, k, n_begin, n_end, n);
              ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
                  << (fn == alt ? "decode alternative" : "x16 tile");
            }
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no table with packed float tiles on this CPU";
}

}  // namespace
}  // namespace kvserve
