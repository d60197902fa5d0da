// The quantized KV types (kv_format.h: q8_0, q4_0) and the attention kernels that read them
// (attend_head_quant_*.cc):
// - the head-row codec: layout sizes, the rounding error bound of each type, values on the grid
//   kept exactly, zeros and NaN;
// - the scalar twin against a double-precision softmax attention over the dequantized K/V;
// - every SIMD table bit-identical to the scalar one, over head sizes (odd ones, partial groups),
//   key counts, block sizes, shuffled block tables, windows and soft-caps, never writing past
//   head_dim;
// - StoreKv and AttentionJob (attention.h) on a KvLayerView: rows stored per head, read as the
//   kernel reads them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernels.h"
#include "kv/kv_format.h"
#include "kv/kv_spec.h"
#include "support/attention_reference.h"
#include "support/kernel_tables.h"
#include "support/test_backend.h"
#include "util/half.h"

namespace kvserve {
namespace {

using ::kvserve::testing::FastTables;

constexpr KvType kQuantTypes[] = {KvType::kQ8_0, KvType::kQ4_0};

std::vector<float> RandomRow(int n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// ---- The codec ---------------------------------------------------------------------------------

TEST(KvQuantCodec, HeadBytes) {
  // Codes, then one f16 scale per group of 32 (the last group may be shorter).
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 64), 64u + 2 * 2);
  EXPECT_EQ(KvHeadBytes(KvType::kQ4_0, 64), 32u + 2 * 2);
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 8), 8u + 2);
  EXPECT_EQ(KvHeadBytes(KvType::kQ4_0, 8), 4u + 2);
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 80), 80u + 3 * 2);
  EXPECT_EQ(KvHeadBytes(KvType::kQ4_0, 15), 8u + 2);
  EXPECT_EQ(KvHeadBytes(KvType::kF16, 64), 128u);
  EXPECT_EQ(KvHeadBytes(KvType::kF32, 64), 256u);
  // As GGML's blocks: 34 and 18 bytes per 32 elements.
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 128), 128u / 32 * 34);
  EXPECT_EQ(KvHeadBytes(KvType::kQ4_0, 128), 128u / 32 * 18);
}

// Each element lands within half a quantization step of its value: the step is the group's scale
// (largest magnitude / 127 for q8_0, / 8 for q4_0), stored as f16 (relative error 2^-11, or an
// absolute 2^-25 where the scale is an f16 subnormal, below 2^-14), which moves the grid point of
// a code c by up to |c| times that more. q4_0's codes reach -8 on the side of the value of largest
// magnitude but only +7 on the other, so there a value may lie up to a whole step off.
TEST(KvQuantCodec, ErrorWithinAStep) {
  std::mt19937 rng(1);
  for (KvType type : kQuantTypes) {
    const float max_code = type == KvType::kQ8_0 ? 127.0f : 8.0f;
    const double steps = type == KvType::kQ8_0 ? 0.5 : 1.0;
    for (int head_dim : {1, 7, 8, 31, 32, 33, 64, 80, 128, 256}) {
      for (float scale : {1e-3f, 1.0f, 40.0f}) {
        SCOPED_TRACE(std::string(KvTypeName(type)) + " head_dim=" + std::to_string(head_dim));
        const std::vector<float> x = RandomRow(head_dim, scale, rng);
        std::vector<uint8_t> bytes(KvHeadBytes(type, head_dim));
        EncodeKvHead(type, x.data(), head_dim, bytes.data());
        std::vector<float> y(head_dim);
        DecodeKvHead(type, bytes.data(), head_dim, y.data());
        for (int g = 0; g * kKvQuantGroup < head_dim; ++g) {
          const int begin = g * kKvQuantGroup;
          const int end = std::min(head_dim, begin + kKvQuantGroup);
          float amax = 0.0f;
          for (int i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
          const double step = amax / max_code;
          for (int i = begin; i < end; ++i) {
            const double scale_error = std::max(step * 0x1p-11, 0x1p-25);
            EXPECT_LE(std::fabs(double{y[i]} - x[i]), step * steps + max_code * scale_error)
                << "i=" << i << " x=" << x[i] << " y=" << y[i];
          }
        }
      }
    }
  }
}

// Values already on a group's grid (scale times a code, with an f16 scale) come back exactly;
// the group's largest magnitude sets the scale.
TEST(KvQuantCodec, GridValuesComeBackExactly) {
  const int head_dim = 64;
  std::vector<float> x(head_dim);
  for (int i = 0; i < head_dim; ++i) x[i] = 0.25f * static_cast<float>(i % 15 - 7);
  x[3] = 0.25f * 127;  // q8_0: the scale is 0.25 in both groups
  x[40] = -0.25f * 127;
  std::vector<uint8_t> bytes(KvHeadBytes(KvType::kQ8_0, head_dim));
  EncodeKvHead(KvType::kQ8_0, x.data(), head_dim, bytes.data());
  std::vector<float> y(head_dim);
  DecodeKvHead(KvType::kQ8_0, bytes.data(), head_dim, y.data());
  EXPECT_EQ(y, x);

  // q4_0: scale = (value of largest magnitude) / -8, codes -8 .. 7.
  for (int i = 0; i < head_dim; ++i) x[i] = 0.5f * static_cast<float>(i % 16 - 8);
  bytes.assign(KvHeadBytes(KvType::kQ4_0, head_dim), 0);
  EncodeKvHead(KvType::kQ4_0, x.data(), head_dim, bytes.data());
  DecodeKvHead(KvType::kQ4_0, bytes.data(), head_dim, y.data());
  EXPECT_EQ(y, x);
  // Element 2i in the low nibble of byte i: x[0] = -4 = 0.5 * (0 - 8), x[1] = -3.5 = 0.5 * (1 - 8).
  EXPECT_EQ(bytes[0], 0x10);
}

TEST(KvQuantCodec, ZerosAndNan) {
  for (KvType type : kQuantTypes) {
    std::vector<float> x(40, 0.0f);
    std::vector<uint8_t> bytes(KvHeadBytes(type, 40), 0xff);
    EncodeKvHead(type, x.data(), 40, bytes.data());
    std::vector<float> y(40, 1.0f);
    DecodeKvHead(type, bytes.data(), 40, y.data());
    for (float v : y) EXPECT_EQ(std::fabs(v), 0.0f) << KvTypeName(type);
    x[5] = NAN;
    x[6] = 2.0f;
    EncodeKvHead(type, x.data(), 40, bytes.data());
    DecodeKvHead(type, bytes.data(), 40, y.data());
    EXPECT_EQ(y[5], 0.0f) << KvTypeName(type);
    EXPECT_NEAR(y[6], 2.0f, 2.0f * 0x1p-10f) << KvTypeName(type);  // the f16 scale's rounding
  }
}

TEST(KvQuantCodec, ParseAndFormats) {
  EXPECT_EQ(*ParseKvType("q8_0"), KvType::kQ8_0);
  EXPECT_EQ(*ParseKvType("q4_0"), KvType::kQ4_0);
  const auto bad = ParseKvType("q5_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'q5_0'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("q4_0"), std::string::npos) << bad.message();

  auto uniform = KvFormat::Parse("q8_0");
  ASSERT_TRUE(uniform.ok());
  EXPECT_TRUE(uniform->uniform());
  EXPECT_EQ(uniform->group(0), KvType::kQ8_0);
  EXPECT_EQ(uniform->group(3), KvType::kQ8_0);
  auto per_group = KvFormat::Parse("f16,q4_0");
  ASSERT_TRUE(per_group.ok());
  EXPECT_FALSE(per_group->uniform());
  EXPECT_EQ(per_group->group(0), KvType::kF16);
  EXPECT_EQ(per_group->group(1), KvType::kQ4_0);
  EXPECT_EQ(per_group->Name(), "f16,q4_0");
  const auto broken = KvFormat::Parse("f16,,q8_0");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.message().find("''"), std::string::npos) << broken.message();

  KvSpec two = KvSpec::Uniform(4, 2, 64);
  two.groups.push_back(two.groups[0]);
  two.groups[0].layers = {0, 2};
  two.groups[1].layers = {1, 3};
  EXPECT_TRUE(two.CheckFormat(*per_group).ok());
  EXPECT_TRUE(two.CheckFormat(KvType::kQ8_0).ok());
  const Status mismatch = KvSpec::Uniform(4, 2, 64).CheckFormat(*per_group);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.message().find("2 types"), std::string::npos) << mismatch.message();
  EXPECT_NE(mismatch.message().find("1 KV layer group"), std::string::npos) << mismatch.message();
  // Per token: 2 (K, V) x layers x heads x head bytes, each group in its own type.
  EXPECT_EQ(two.BytesPerToken(*per_group), 2u * 2 * 2 * 128 + 2u * 2 * 2 * 36);
}

// ---- The kernels -------------------------------------------------------------------------------

// A paged K/V pool of one layer, n_kv_heads head rows per slot, each quantized from random floats,
// and a shuffled block table for a sequence of n_keys positions.
struct QuantPool {
  KvType type;
  int head_dim, n_kv_heads, block_size, n_keys;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> block_table;

  size_t head_bytes() const { return KvHeadBytes(type, head_dim); }
  size_t slot_bytes() const { return head_bytes() * n_kv_heads; }

  QuantPool(KvType type_, int head_dim_, int n_kv_heads_, int block_size_, int n_keys_,
            std::mt19937& rng)
      : type(type_),
        head_dim(head_dim_),
        n_kv_heads(n_kv_heads_),
        block_size(block_size_),
        n_keys(n_keys_) {
    const int n_blocks = (n_keys + block_size - 1) / block_size + 2;  // two spare blocks
    block_table.resize(n_blocks - 2);
    std::vector<int32_t> order(n_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::copy_n(order.begin(), block_table.size(), block_table.begin());
    const size_t rows = static_cast<size_t>(block_size) * n_blocks * n_kv_heads;
    k.resize(rows * head_bytes());
    v.resize(rows * head_bytes());
    for (auto* pool : {&k, &v}) {
      for (size_t r = 0; r < rows; ++r) {
        const std::vector<float> x = RandomRow(head_dim, 1.0f, rng);
        EncodeKvHead(type, x.data(), head_dim, pool->data() + r * head_bytes());
      }
    }
  }
  // The dequantized element d of `head` at `position`.
  float Load(const std::vector<uint8_t>& pool, int position, int head, int d) const {
    const size_t slot = static_cast<size_t>(block_table[position / block_size]) * block_size +
                        position % block_size;
    std::vector<float> row(head_dim);
    DecodeKvHead(type, pool.data() + slot * slot_bytes() + head * head_bytes(), head_dim,
                 row.data());
    return row[d];
  }
  AttendJob Job(const float* q, int head, float* scores, float* out) const {
    const size_t offset = static_cast<size_t>(head) * head_bytes();
    return AttendJob{.q = q,
                     .k = k.data() + offset,
                     .v = v.data() + offset,
                     .slot_bytes = slot_bytes(),
                     .type = type,
                     .block_table = block_table.data(),
                     .block_size = block_size,
                     .n_keys = n_keys,
                     .head_dim = head_dim,
                     .scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                     .scores = scores,
                     .out = out};
  }
};

// Runs `fn` on keys first_key .. n_keys - 1 with a soft-cap; returns out[0, head_dim) and checks
// nothing past it was written.
std::vector<float> RunAttend(AttendHeadFn fn, const QuantPool& pool, const std::vector<float>& q,
                             int head, int first_key = 0, float soft_cap = 0.0f,
                             float sink = -INFINITY) {
  std::vector<float> scores(AttentionScratchFloats(pool.n_keys - first_key, pool.head_dim));
  std::vector<float> out(pool.head_dim + 16, 7.0f);
  AttendJob job = pool.Job(q.data(), head, scores.data(), out.data());
  job.first_key = first_key;
  job.soft_cap = soft_cap;
  job.sink = sink;
  fn(job);
  for (int d = pool.head_dim; d < pool.head_dim + 16; ++d) {
    EXPECT_EQ(out[d], 7.0f) << "wrote past head_dim at " << d;
  }
  out.resize(pool.head_dim);
  return out;
}

TEST(KvQuantAttention, ScalarMatchesDoubleSoftmax) {
  std::mt19937 rng(5);
  for (KvType type : kQuantTypes) {
    for (int head_dim : {8, 64, 80}) {
      for (int n_keys : {1, 2, 17, 100}) {
        for (int window : {0, 9}) {
          SCOPED_TRACE(std::string(KvTypeName(type)) + " head_dim=" + std::to_string(head_dim) +
                       " n_keys=" + std::to_string(n_keys) + " window=" + std::to_string(window));
          const int first = window == 0 ? 0 : std::max(0, n_keys - window);
          const float soft_cap = window == 0 ? 0.0f : 3.0f;
          const QuantPool pool(type, head_dim, 2, 16, n_keys, rng);
          const std::vector<float> q = RandomRow(head_dim, 1.0f, rng);
          const std::vector<float> got = RunAttend(scalar::AttendHead, pool, q, 1, first, soft_cap);
          testing::ExpectNearDoubleAttention(pool, q, 1, first, soft_cap, -INFINITY, got);
        }
      }
    }
  }
}

TEST(KvQuantAttention, SimdMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(9);
  for (KvType type : kQuantTypes) {
    for (int head_dim : {1, 7, 8, 15, 16, 17, 24, 31, 32, 33, 48, 64, 80, 96, 128, 200, 256}) {
      for (int block_size : {16, 5}) {
        for (int n_keys : {1, 3, 15, 16, 17, 31, 33, 64, 129}) {
          const QuantPool pool(type, head_dim, 2, block_size, n_keys, rng);
          for (float q_scale : {0.3f, 8.0f}) {
            const std::vector<float> q = RandomRow(head_dim, q_scale, rng);
            const std::vector<float> want = RunAttend(scalar::AttendHead, pool, q, 1);
            for (const KernelTable* t : tables) {
              SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) + " head_dim=" +
                           std::to_string(head_dim) + " block_size=" + std::to_string(block_size) +
                           " n_keys=" + std::to_string(n_keys));
              const std::vector<float> got = RunAttend(t->attend_head, pool, q, 1);
              ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0)
                  << "first values " << got[0] << " vs " << want[0];
            }
          }
        }
      }
    }
  }
}

TEST(KvQuantAttention, SimdMatchesScalarBitwiseWithWindowAndSoftCap) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(23);
  for (KvType type : kQuantTypes) {
    for (int head_dim : {8, 15, 64, 80, 256}) {
      for (int n_keys : {1, 17, 33, 129}) {
        const QuantPool pool(type, head_dim, 2, 5, n_keys, rng);
        for (int window : {1, 7, 16, 17, 40}) {
          const int first = std::max(0, n_keys - window);
          for (float soft_cap : {0.0f, 1.5f, 50.0f}) {
            const std::vector<float> q = RandomRow(head_dim, 4.0f, rng);
            const std::vector<float> want =
                RunAttend(scalar::AttendHead, pool, q, 1, first, soft_cap);
            for (const KernelTable* t : tables) {
              SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) +
                           " head_dim=" + std::to_string(head_dim) +
                           " n_keys=" + std::to_string(n_keys) + " first=" + std::to_string(first) +
                           " soft_cap=" + std::to_string(soft_cap));
              const std::vector<float> got = RunAttend(t->attend_head, pool, q, 1, first, soft_cap);
              ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0)
                  << "first values " << got[0] << " vs " << want[0];
            }
          }
        }
      }
    }
  }
}

// Keys before the window are never read: giving their rows NaN scales (every element NaN when
// dequantized) changes no bit, in any table.
TEST(KvQuantAttention, ReadsOnlyTheWindow) {
  std::mt19937 rng(29);
  std::vector<const KernelTable*> tables = FastTables();
  tables.push_back(&ScalarKernels());
  for (KvType type : kQuantTypes) {
    SCOPED_TRACE(KvTypeName(type));
    const int n_keys = 45, first = 37, head_dim = 64;  // a window of 8 from inside a block of 5
    QuantPool pool(type, head_dim, 2, 5, n_keys, rng);
    const std::vector<float> q = RandomRow(head_dim, 1.0f, rng);
    std::vector<std::vector<float>> clean;
    for (const KernelTable* t : tables) {
      clean.push_back(RunAttend(t->attend_head, pool, q, 1, first, 50.0f));
    }
    const uint16_t nan = 0x7e00;  // f16 NaN
    const size_t scales = KvCodeBytes(type, head_dim);
    for (int position = 0; position < first; ++position) {
      const size_t slot =
          static_cast<size_t>(pool.block_table[position / pool.block_size]) * pool.block_size +
          position % pool.block_size;
      for (int h = 0; h < pool.n_kv_heads; ++h) {
        for (auto* bytes : {&pool.k, &pool.v}) {
          uint8_t* row = bytes->data() + slot * pool.slot_bytes() + h * pool.head_bytes();
          for (int g = 0; g < head_dim / kKvQuantGroup; ++g)
            std::memcpy(row + scales + 2 * g, &nan, 2);
        }
      }
    }
    EXPECT_TRUE(std::isnan(pool.Load(pool.k, 0, 1, 0)));
    for (size_t i = 0; i < tables.size(); ++i) {
      SCOPED_TRACE(tables[i]->isa);
      const std::vector<float> got = RunAttend(tables[i]->attend_head, pool, q, 1, first, 50.0f);
      EXPECT_EQ(std::memcmp(got.data(), clean[i].data(), sizeof(float) * head_dim), 0);
      EXPECT_FALSE(std::isnan(got[0]));
    }
  }
}

// StoreKv quantizes each head row of a token alone, into the slot's place; AttendHead on the view
// reads what the kernel reads from the same bytes.
TEST(KvQuantAttention, StoreKvAndTheViewAgreeWithTheKernel) {
  std::mt19937 rng(3);
  for (KvType type : kQuantTypes) {
    SCOPED_TRACE(KvTypeName(type));
    const int head_dim = 80, n_kv_heads = 3, block_size = 4, n_blocks = 6, n_keys = 21;
    const size_t head_bytes = KvHeadBytes(type, head_dim);
    std::vector<uint8_t> k(head_bytes * n_kv_heads * block_size * n_blocks, 0xaa);
    std::vector<uint8_t> v(k.size(), 0xaa);
    const KvLayerView view{.k = k.data(),
                           .v = v.data(),
                           .type = type,
                           .block_size = block_size,
                           .n_kv_heads = n_kv_heads,
                           .head_dim = head_dim};
    ASSERT_EQ(view.slot_bytes(), head_bytes * n_kv_heads);
    const std::vector<int32_t> block_table = {4, 0, 5, 2, 1, 3};
    std::vector<std::vector<float>> k_rows, v_rows;
    for (int pos = 0; pos < n_keys; ++pos) {
      k_rows.push_back(RandomRow(head_dim * n_kv_heads, 1.0f, rng));
      v_rows.push_back(RandomRow(head_dim * n_kv_heads, 1.0f, rng));
      StoreKv(view, KvSlot(block_table.data(), block_size, pos), k_rows.back().data(),
              v_rows.back().data());
    }
    for (int pos = 0; pos < n_keys; ++pos) {
      const int64_t slot = KvSlot(block_table.data(), block_size, pos);
      for (int h = 0; h < n_kv_heads; ++h) {
        std::vector<uint8_t> want(head_bytes);
        EncodeKvHead(type, k_rows[pos].data() + h * head_dim, head_dim, want.data());
        EXPECT_EQ(std::memcmp(k.data() + slot * view.slot_bytes() + h * head_bytes, want.data(),
                              head_bytes),
                  0)
            << "pos " << pos << " head " << h;
      }
    }
    const std::vector<float> q = RandomRow(head_dim, 1.0f, rng);
    std::vector<float> scratch(AttentionScratchFloats(n_keys, head_dim));
    std::vector<float> got(head_dim), want(head_dim);
    testing::TestCpuKernels().attend_head(AttentionJob(view, q.data(), 2, block_table.data(),
                                                       n_keys, 0.125f, got.data(), scratch.data()));
    scalar::AttendHead(AttendJob{.q = q.data(),
                                 .k = k.data() + 2 * head_bytes,
                                 .v = v.data() + 2 * head_bytes,
                                 .slot_bytes = view.slot_bytes(),
                                 .type = type,
                                 .block_table = block_table.data(),
                                 .block_size = block_size,
                                 .n_keys = n_keys,
                                 .head_dim = head_dim,
                                 .scale = 0.125f,
                                 .scores = scratch.data(),
                                 .out = want.data()});
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0);
  }
}

// A learned sink on quantized KV: the scalar table against the double softmax with the sink in
// its denominator, and every SIMD table bit for bit against the scalar one.
TEST(KvQuantAttention, SinksMatchTheDoubleSoftmaxAndEveryTable) {
  const auto tables = FastTables();
  std::mt19937 rng(31);
  for (KvType type : kQuantTypes) {
    for (int head_dim : {15, 64, 256}) {
      for (int n_keys : {1, 17, 100}) {
        const QuantPool pool(type, head_dim, 2, 16, n_keys, rng);
        for (float sink : {-INFINITY, -3.0f, 0.8f, 25.0f}) {
          SCOPED_TRACE(std::string(KvTypeName(type)) + " head_dim=" + std::to_string(head_dim) +
                       " n_keys=" + std::to_string(n_keys) + " sink=" + std::to_string(sink));
          const std::vector<float> q = RandomRow(head_dim, 1.0f, rng);
          const std::vector<float> want = RunAttend(scalar::AttendHead, pool, q, 1, 0, 0.0f, sink);
          testing::ExpectNearDoubleAttention(pool, q, 1, 0, 0.0f, sink, want);
          for (const KernelTable* t : tables) {
            const std::vector<float> got = RunAttend(t->attend_head, pool, q, 1, 0, 0.0f, sink);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0) << t->isa;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
