// The x16 weight layout (kernels/packed_weights.h) and the kernels that read it:
// - PackGroups then UnpackRow gives back every stored row, byte for byte;
// - on every table with packed kernels, the packed matmul equals the same table's stored-layout
//   matmul bit for bit, for any m and any 16-aligned output range;
// - the AVX2, AVX-VNNI and AVX-512 quantized tiles give the same bits;
// - a model gives the same logits bits with and without packing (CpuBackendOptions::pack).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/forward.h"
#include "support/kernel_tables.h"
#include "support/paths.h"
#include "support/test_backend.h"
#include "util/half.h"

namespace kvserve {
namespace {

constexpr GgmlType kPackedTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0};

// The fast tables with packed kernels that this CPU can run.
std::vector<const KernelTable*> PackedTables() {
  std::vector<const KernelTable*> tables;
  for (const KernelTable* t : testing::FastTables()) {
    if (t->matmul_q8_0_x16 != nullptr) tables.push_back(t);
  }
  return tables;
}

std::vector<uint8_t> RandomMatrix(GgmlType type, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(n_in);
  const size_t row_bytes = RowBytes(type, n_in);
  std::vector<uint8_t> w(row_bytes * n_out);
  for (int j = 0; j < n_out; ++j) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(type, row.data(), n_in, w.data() + row_bytes * j);
  }
  return w;
}

// A packed matrix in a 64-byte aligned buffer (the kernels load whole aligned vectors).
struct PackedMatrix {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
  const uint8_t* data() const { return bytes.get(); }
};

PackedMatrix Pack(GgmlType type, const std::vector<uint8_t>& w, int n_out, int n_in) {
  PackedMatrix packed;
  packed.bytes.reset(
      static_cast<uint8_t*>(std::aligned_alloc(64, PackedMatrixBytes(type, n_out, n_in))));
  PackGroups(type, w.data(), RowBytes(type, n_in), n_out, n_in, 0,
             (n_out + kPackRows - 1) / kPackRows, packed.bytes.get());
  return packed;
}

TEST(PackedWeightsTest, UnpackRestoresEveryRow) {
  for (GgmlType type : kPackedTypes) {
    for (int n_out : {1, 15, 16, 17, 40}) {
      for (int n_in : {32, 96, 2048}) {
        SCOPED_TRACE(std::string(GgmlTypeName(type)) + " " + std::to_string(n_out) + "x" +
                     std::to_string(n_in));
        const std::vector<uint8_t> w = RandomMatrix(type, n_out, n_in, n_out * 7 + n_in);
        const PackedMatrix packed = Pack(type, w, n_out, n_in);
        const size_t row_bytes = RowBytes(type, n_in);
        std::vector<uint8_t> row(row_bytes);
        for (int j = 0; j < n_out; ++j) {
          UnpackRow(type, packed.data(), n_in, j, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.data() + row_bytes * j, row_bytes), 0) << "row " << j;
        }
      }
    }
  }
}

TEST(PackedWeightsTest, GroupsAre64ByteMultiples) {
  for (GgmlType type : kPackedTypes) {
    for (int n_in : {32, 64, 2048, 5632}) {
      EXPECT_EQ(PackedGroupBytes(type, n_in) % 64, 0u);
      EXPECT_GE(PackedGroupBytes(type, n_in) * 1.0, 16.0 * RowBytes(type, n_in));
      // The layout costs no more bandwidth than the stored one, up to the 64-byte rounding.
      EXPECT_LE(PackedGroupBytes(type, n_in), 16 * RowBytes(type, n_in) + 63);
    }
  }
}

std::vector<float> RunTile(MatmulTileFn fn, const uint8_t* w, size_t w_row_bytes,
                           const std::vector<BlockQ8_0>& x, int m, int k, int n_begin, int n_end,
                           int n) {
  return testing::RunTile(fn, w, w_row_bytes, reinterpret_cast<const uint8_t*>(x.data()),
                          sizeof(BlockQ8_0) * (k / 32), m, k, n_begin, n_end, n);
}

TEST(PackedWeightsTest, PackedKernelsMatchStoredLayoutBitwise) {
  const std::vector<const KernelTable*> tables = PackedTables();
  if (tables.empty()) GTEST_SKIP() << "no table with packed kernels on this CPU";
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const KernelTable* table : tables) {
    for (GgmlType type : kPackedTypes) {
      for (int k : {32, 96, 256}) {
        const int n = 45;
        const std::vector<uint8_t> w = RandomMatrix(type, n, k, k);
        const PackedMatrix packed = Pack(type, w, n, k);
        for (int m : {1, 2, 3, 4, 5, 6, 7, 13, 16, 33}) {
          std::vector<float> row(k);
          std::vector<BlockQ8_0> x(static_cast<size_t>(m) * (k / 32));
          for (int i = 0; i < m; ++i) {
            for (float& v : row) v = dist(rng);
            table->quantize_row_q8_0(row.data(), k, x.data() + static_cast<size_t>(i) * (k / 32));
          }
          for (auto [n_begin, n_end] : {std::pair{0, n}, {16, n}, {0, 16}, {32, 33}}) {
            SCOPED_TRACE(std::string(table->isa) + " " + GgmlTypeName(type) +
                         " k=" + std::to_string(k) + " m=" + std::to_string(m) + " n=[" +
                         std::to_string(n_begin) + "," + std::to_string(n_end) + ")");
            const std::vector<float> want = RunTile(MatmulFor(*table, type), w.data(),
                                                    RowBytes(type, k), x, m, k, n_begin, n_end, n);
            const std::vector<float> got =
                RunTile(PackedMatmulFor(*table, type), packed.data(), PackedGroupBytes(type, k), x,
                        m, k, n_begin, n_end, n);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0);
            // The decode alternative (prefetches into L2, KernelTable::decode_q4_0_x16_l2 ...).
            if (const MatmulTileFn alt = DecodeAlternativeFor(*table, type, true); alt != nullptr) {
              const std::vector<float> got_alt = RunTile(
                  alt, packed.data(), PackedGroupBytes(type, k), x, m, k, n_begin, n_end, n);
              ASSERT_EQ(std::memcmp(want.data(), got_alt.data(), sizeof(float) * want.size()), 0);
            }
          }
        }
      }
    }
  }
}

// Random stored blocks: any quant byte (-128 included for Q8_0) and f16 scales of either sign.
std::vector<uint8_t> RandomBlocks(GgmlType type, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  const size_t block_bytes = RowBytes(type, 32);
  std::vector<uint8_t> w(RowBytes(type, n_in) * n_out);
  for (size_t b = 0; b < w.size(); b += block_bytes) {
    const uint16_t d = FloatToFp16(scale(rng));
    std::memcpy(&w[b], &d, sizeof(d));
    for (size_t i = 2; i < block_bytes; ++i) w[b + i] = static_cast<uint8_t>(byte(rng));
  }
  return w;
}

// The AVX2, AVX-VNNI and AVX-512 quantized tiles share one accumulation order
// (quant_tiles_avx2.h), so they give the same bits, stored layout or packed, for any m (every
// register-tile remainder). Each table is compared with the first one this CPU has.
TEST(PackedWeightsTest, QuantMatmulsGiveTheSameBitsOnEveryTable) {
  const std::vector<const KernelTable*> tables = PackedTables();
  if (tables.size() < 2) GTEST_SKIP() << "fewer than two tables with packed kernels on this CPU";
  const KernelTable* first = tables[0];
  std::mt19937 rng(33);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType type : kPackedTypes) {
    for (int k : {32, 64, 288}) {
      const int n = 45;
      const std::vector<uint8_t> w = RandomBlocks(type, n, k, 7 * k + 1);
      const PackedMatrix packed = Pack(type, w, n, k);
      for (int m : {1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 35}) {
        std::vector<float> row(k);
        std::vector<BlockQ8_0> x(static_cast<size_t>(m) * (k / 32));
        for (int i = 0; i < m; ++i) {
          for (float& v : row) v = dist(rng);
          ScalarKernels().quantize_row_q8_0(row.data(), k,
                                            x.data() + static_cast<size_t>(i) * (k / 32));
        }
        for (const KernelTable* other : tables) {
          if (other == first) continue;
          SCOPED_TRACE(std::string(other->isa) + " vs " + first->isa + " " + GgmlTypeName(type) +
                       " k=" + std::to_string(k) + " m=" + std::to_string(m));
          for (auto [n_begin, n_end] : {std::pair{0, n}, {3, 41}}) {
            const std::vector<float> want = RunTile(MatmulFor(*first, type), w.data(),
                                                    RowBytes(type, k), x, m, k, n_begin, n_end, n);
            const std::vector<float> got = RunTile(MatmulFor(*other, type), w.data(),
                                                   RowBytes(type, k), x, m, k, n_begin, n_end, n);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
                << "stored layout, n=[" << n_begin << "," << n_end << ")";
          }
          const std::vector<float> want = RunTile(PackedMatmulFor(*first, type), packed.data(),
                                                  PackedGroupBytes(type, k), x, m, k, 16, n, n);
          const std::vector<float> got = RunTile(PackedMatmulFor(*other, type), packed.data(),
                                                 PackedGroupBytes(type, k), x, m, k, 16, n, n);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
              << "packed";
        }
      }
    }
  }
}

// Loads `path` on a CPU backend that packs or not and returns every position's logits: from one
// batched pass (the prefill tiles), then from one pass per token (the decode tiles).
std::vector<float> Logits(const std::string& path, bool pack, bool* packed) {
  CpuBackendOptions options = CpuBackendOptions::FromEnvironment();
  options.pack = pack;
  const CpuBackend backend(options);
  auto model = LoadModel(path, backend);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return {};
  *packed = false;
  for (const WeightMatrix* m : (*model)->matrices()) *packed |= m->packed != nullptr;
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 31, 7, 7, 40, 3, 11, 2, 60};
  std::vector<float> logits = testing::AllPositionLogits(**model, tokens);
  const std::vector<float> one_by_one = testing::OneByOneLogits(**model, tokens);
  logits.insert(logits.end(), one_by_one.begin(), one_by_one.end());
  return logits;
}

TEST(PackedWeightsTest, ModelLogitsAreTheSameBitsPackedOrNot) {
  const bool can_pack = PackedMatmulFor(testing::TestCpuKernels(), GgmlType::kQ8_0) != nullptr;
  for (std::string arch : {"llama", "gpt2"}) {
    for (GgmlType type : kPackedTypes) {
      SCOPED_TRACE(arch + " " + GgmlTypeName(type));
      auto vocab = GgufFile::Open(testing::ModelPath(DefaultVocabFile(arch)));
      ASSERT_TRUE(vocab.ok()) << vocab.message();
      // Odd sizes: 40 output rows of wk/wv (2 groups + 8), 96-wide feed-forward.
      auto synth = SyntheticModel::Create({.shape = {.arch = arch,
                                                     .n_embd = 64,
                                                     .n_layers = 2,
                                                     .n_heads = 4,
                                                     .n_kv_heads = arch == "llama" ? 2 : 4,
                                                     .n_ff = 96,
                                                     .n_ctx = 64},
                                           .type = type,
                                           .seed = 4},
                                          *vocab);
      ASSERT_TRUE(synth.ok()) << synth.message();
      const std::string path =
          testing::TempDir() + "/packed-" + arch + "-" + GgmlTypeName(type) + ".gguf";
      ASSERT_TRUE(synth->WriteFile(path).ok());
      bool stored_packed = true, packed = false;
      const std::vector<float> stored = Logits(path, false, &stored_packed);
      const std::vector<float> repacked = Logits(path, true, &packed);
      EXPECT_FALSE(stored_packed);
      EXPECT_EQ(packed, can_pack);
      ASSERT_EQ(stored.size(), repacked.size());
      ASSERT_FALSE(stored.empty());
      EXPECT_EQ(std::memcmp(stored.data(), repacked.data(), sizeof(float) * stored.size()), 0);
    }
  }
}

// The K-quant files of every family (Q4_K_M mixes Q4_K and Q6_K; the MoE file packs its experts)
// and float files of three (packed_floats.h; gpt2-tiny's output matrix is its token embedding,
// read back row by row from the packed copy).
TEST(PackedWeightsTest, KquantAndFloatFilesGiveTheSameLogitsBitsPackedOrNot) {
  const std::pair<const char*, GgmlType> files[] = {
      {"arch/llama3-q4_k_m", GgmlType::kQ4_K},   {"arch/llama3-q5_k_m", GgmlType::kQ5_K},
      {"arch/llama3-q6_k", GgmlType::kQ6_K},     {"arch/gemma3-q4_k_m", GgmlType::kQ4_K},
      {"arch/qwen3moe-q4_k_m", GgmlType::kQ4_K}, {"gpt2-tiny-f32", GgmlType::kF32},
      {"arch/gemma2-f16", GgmlType::kF16},       {"arch/llama3-f32", GgmlType::kF32}};
  for (auto [name, type] : files) {
    SCOPED_TRACE(name);
    const bool can_pack = PackedMatmulFor(testing::TestCpuKernels(), type) != nullptr;
    const std::string path = testing::ModelPath(std::string(name) + ".gguf");
    bool stored_packed = true, packed = false;
    const std::vector<float> stored = Logits(path, false, &stored_packed);
    const std::vector<float> repacked = Logits(path, true, &packed);
    EXPECT_FALSE(stored_packed);
    EXPECT_EQ(packed, can_pack);
    ASSERT_EQ(stored.size(), repacked.size());
    ASSERT_FALSE(stored.empty());
    EXPECT_EQ(std::memcmp(stored.data(), repacked.data(), sizeof(float) * stored.size()), 0);
  }
}

}  // namespace
}  // namespace kvserve
