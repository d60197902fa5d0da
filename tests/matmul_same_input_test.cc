// matmul_same_input_test: MatmulSameInput (the q/k/v and gate/up projections of one input as one
// job at decode) gives each matrix the bits of its own Matmul, on every kernel table, packed or
// not, for 1..6 activation rows: where the matrices share an activation format, where they do
// not (Q4_0's Q8_0 and Q4_1's Q8_1), with more matrices than one job takes, and while the decode
// tile chooser is still timing (it then sees one call per matrix and still decides). And Matmul
// itself gives the same bits on any number of threads, whichever way it splits the rows among them
// (pieces taken as the threads finish at decode and for float weights at prefill, an even split
// for the rest).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/decode_tile_chooser.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/quantize.h"
#include "support/kernel_tables.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace kvserve {
namespace {

using AlignedBytes = std::vector<uint8_t, AlignedAllocator<uint8_t, 64>>;

// A random matrix of `type`, in the stored layout and, where the type has one, the x16 layout.
class TestMatrix {
 public:
  TestMatrix(GgmlType type, int n_out, int n_in, bool pack, std::mt19937& rng)
      : stored_(RowBytes(type, n_in) * n_out) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(n_in);
    for (int j = 0; j < n_out; ++j) {
      for (float& v : row) v = dist(rng);
      QuantizeRow(type, row.data(), n_in, stored_.data() + RowBytes(type, n_in) * j);
    }
    w_ = {.type = type,
          .data = stored_.data(),
          .n_out = n_out,
          .n_in = n_in,
          .row_bytes = RowBytes(type, n_in)};
    if (pack && HasPackedLayout(type)) {
      packed_.resize(PackedMatrixBytes(type, n_out, n_in));
      PackGroups(type, stored_.data(), w_.row_bytes, n_out, n_in, 0,
                 (n_out + kPackRows - 1) / kPackRows, packed_.data());
      w_.packed = packed_.data();
    }
  }
  const WeightMatrix& w() const { return w_; }

 private:
  AlignedBytes stored_;
  AlignedBytes packed_;
  WeightMatrix w_;
};

struct Shape {
  GgmlType type;
  int n_out;
};

// Each matrix's output of one MatmulSameInput against its own Matmul's, bit for bit.
void ExpectSameAsOneByOne(const KernelTable& table, const std::vector<Shape>& shapes, int n_in,
                          bool pack, ThreadPool& pool, DecodeTileChooser* chooser = nullptr) {
  std::mt19937 rng(7);
  std::vector<std::unique_ptr<TestMatrix>> matrices;
  std::vector<const WeightMatrix*> ws;
  for (const Shape& s : shapes) {
    matrices.push_back(std::make_unique<TestMatrix>(s.type, s.n_out, n_in, pack, rng));
    ws.push_back(&matrices.back()->w());
  }
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(6) * n_in);
  for (float& v : x) v = dist(rng);
  MatmulScratch scratch(pool.size());
  for (int m = 1; m <= 6; ++m) {
    std::vector<std::vector<float>> want(ws.size()), got(ws.size());
    std::vector<float*> outputs;
    for (size_t i = 0; i < ws.size(); ++i) {
      want[i].assign(static_cast<size_t>(m) * ws[i]->n_out, 0.0f);
      got[i].assign(want[i].size(), -1.0f);
      Matmul(table, *ws[i], x.data(), m, want[i].data(), scratch, pool);
      outputs.push_back(got[i].data());
    }
    MatmulSameInput(table, ws, x.data(), m, outputs, scratch, pool, chooser);
    for (size_t i = 0; i < ws.size(); ++i) {
      ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
          << table.isa << " matrix " << i << " (" << GgmlTypeName(shapes[i].type) << ") m " << m
          << (pack ? " packed" : " stored");
    }
  }
}

const std::vector<std::vector<Shape>>& ShapeSets() {
  static const std::vector<std::vector<Shape>> sets = {
      // q, k and v of a grouped-query layer; odd sizes, so pieces end inside a 16-row group.
      {{GgmlType::kQ4_0, 72}, {GgmlType::kQ4_0, 24}, {GgmlType::kQ4_0, 24}},
      {{GgmlType::kQ4_K, 40}, {GgmlType::kQ4_K, 17}, {GgmlType::kQ6_K, 17}},  // Q4_K_M's mix
      {{GgmlType::kQ8_0, 33}, {GgmlType::kQ8_0, 16}, {GgmlType::kQ8_0, 1}, {GgmlType::kQ8_0, 50}},
      {{GgmlType::kF16, 48}, {GgmlType::kF16, 96}},    // gate and up
      {{GgmlType::kQ4_1, 32}, {GgmlType::kQ4_1, 16}},  // Q8_1 activations
      {{GgmlType::kQ4_0, 32}, {GgmlType::kQ4_1, 16}},  // two activation formats
      {{GgmlType::kQ5_K, 16},
       {GgmlType::kQ5_K, 16},
       {GgmlType::kQ5_K, 16},
       {GgmlType::kQ5_K, 16},
       {GgmlType::kQ5_K, 16}},  // more than one job takes
  };
  return sets;
}

TEST(MatmulSameInput, EachMatrixGetsItsOwnMatmulsBits) {
  ThreadPool pool(3);
  std::vector<const KernelTable*> tables = {&ScalarKernels()};
  for (const KernelTable* t : testing::FastTables()) tables.push_back(t);
  for (const KernelTable* table : tables) {
    for (const auto& shapes : ShapeSets()) {
      for (bool pack : {false, true}) ExpectSameAsOneByOne(*table, shapes, 512, pack, pool);
    }
  }
}

// While the chooser times a type, each matrix is its own call (so each is timed alone); the
// chooser still decides, and the bits never change.
TEST(MatmulSameInput, TheDecodeTileChooserStillDecides) {
  ThreadPool pool(2);
  const KernelTable& table = KernelsFor("");
  if (DecodeAlternativeFor(table, GgmlType::kQ4_K, true) == nullptr) {
    GTEST_SKIP() << table.isa << " has one Q4_K decode tile: nothing to choose";
  }
  DecodeTileChooser chooser(table);
  const std::vector<Shape> shapes = {{GgmlType::kQ4_K, 64}, {GgmlType::kQ4_K, 32}};
  // Each round calls each matrix at m = 1 once through MatmulSameInput.
  const int rounds = DecodeTileChooser::kWarmupCalls + 2 * DecodeTileChooser::kTrialCalls;
  for (int i = 0; i < rounds; ++i) ExpectSameAsOneByOne(table, shapes, 256, true, pool, &chooser);
  const std::string described = chooser.Describe();
  EXPECT_NE(described.find("Q4_K"), std::string::npos) << described;
  EXPECT_NE(described.find("->"), std::string::npos) << described;
}

TEST(MatmulThreads, TheThreadCountChangesNoBit) {
  std::vector<const KernelTable*> tables = {&ScalarKernels()};
  for (const KernelTable* t : testing::FastTables()) tables.push_back(t);
  ThreadPool one(1), two(2), three(3);
  MatmulScratch scratch(3);
  // Rows past the float prefill path's k block (its accumulators spill between blocks) and a last
  // 16-row group with 4 rows.
  const int n_out = 100, n_in = 4096 + 64;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(40) * n_in);
  for (float& v : x) v = dist(rng);
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    for (bool pack : {false, true}) {
      const TestMatrix matrix(type, n_out, n_in, pack, rng);
      for (const KernelTable* table : tables) {
        for (int m : {1, 17, 40}) {
          std::vector<float> want(static_cast<size_t>(m) * n_out);
          Matmul(*table, matrix.w(), x.data(), m, want.data(), scratch, one);
          for (ThreadPool* pool : {&two, &three}) {
            std::vector<float> got(want.size(), -1.0f);
            Matmul(*table, matrix.w(), x.data(), m, got.data(), scratch, *pool);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << table->isa << " " << GgmlTypeName(type) << " m " << m << " on " << pool->size()
                << " threads" << (pack ? " packed" : " stored");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
