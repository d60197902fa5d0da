// The attend_head kernels (kernels.h AttendJob, attend_head.h):
// - KvExp against std::exp;
// - the scalar reference against a double-precision softmax attention;
// - every SIMD table bit-identical to the scalar one, over head sizes, key counts, block sizes,
//   shuffled block tables and K/V element types, never writing past head_dim;
// - AttentionJob (attention.h) giving the kernel the same job on a KvLayerView;
// - attend_group (several query heads of one token, across KV heads) giving each job the scalar
//   kernel's bits on every table, with its own query, sink and bias, windows and soft-caps;
// - sliding windows (AttendJob::first_key) and score soft-caps: the scalar kernel against a
//   double-precision reference, every SIMD table bit-identical to it, and no key outside the
//   window read;
// - a bias per key (T5's relative position bias): the same checks, and PagedAttention looking it
//   up by distance and reading every key of a sequence when told its key count (non-causal).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernels.h"
#include "support/attention_reference.h"
#include "support/kernel_tables.h"
#include "support/test_backend.h"
#include "util/half.h"

namespace kvserve {
namespace {

constexpr float kEps = std::numeric_limits<float>::epsilon();

using ::kvserve::testing::FastTables;

TEST(KvExpTest, CloseToExp) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0013f) {
    const double want = std::exp(static_cast<double>(x));
    const double got = scalar::KvExp(x);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  EXPECT_LE(worst, 3 * kEps) << "worst relative error " << worst;
  EXPECT_EQ(scalar::KvExp(0.0f), 1.0f);
  EXPECT_EQ(scalar::KvExp(-0.0f), 1.0f);
  EXPECT_EQ(scalar::KvExp(-90.0f), 0.0f);
  EXPECT_EQ(scalar::KvExp(-INFINITY), 0.0f);
}

// A paged K/V pool of one layer with n_kv_heads heads, filled with random values of `type`, and a
// shuffled block table for a sequence of n_keys positions.
struct Pool {
  KvType type;
  int head_dim, n_kv_heads, block_size, n_keys;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> block_table;

  size_t elem() const { return type == KvType::kF32 ? 4 : 2; }
  size_t slot_bytes() const { return elem() * head_dim * n_kv_heads; }

  Pool(KvType type_, int head_dim_, int n_kv_heads_, int block_size_, int n_keys_,
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
    const size_t bytes = slot_bytes() * block_size * n_blocks;
    k.resize(bytes);
    v.resize(bytes);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto* pool : {&k, &v}) {
      for (size_t i = 0; i < bytes / elem(); ++i) Store(pool->data(), i, dist(rng));
    }
  }
  void Store(uint8_t* base, size_t i, float x) const {
    if (type == KvType::kF32) {
      reinterpret_cast<float*>(base)[i] = x;
    } else if (type == KvType::kF16) {
      reinterpret_cast<uint16_t*>(base)[i] = FloatToFp16(x);
    } else {
      reinterpret_cast<uint16_t*>(base)[i] = FloatToBf16(x);
    }
  }
  float Load(const std::vector<uint8_t>& pool, int position, int head, int d) const {
    const size_t slot = static_cast<size_t>(block_table[position / block_size]) * block_size +
                        position % block_size;
    const size_t i = slot * head_dim * n_kv_heads + static_cast<size_t>(head) * head_dim + d;
    if (type == KvType::kF32) return reinterpret_cast<const float*>(pool.data())[i];
    const uint16_t h = reinterpret_cast<const uint16_t*>(pool.data())[i];
    return type == KvType::kF16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
  }
  // The pool as the backend reads a layer's KV.
  KvLayerView View() const {
    return KvLayerView{.k = const_cast<uint8_t*>(k.data()),
                       .v = const_cast<uint8_t*>(v.data()),
                       .type = type,
                       .block_size = block_size,
                       .n_kv_heads = n_kv_heads,
                       .head_dim = head_dim};
  }
  AttendJob Job(const float* q, int head, float* scores, float* out) const {
    const size_t offset = static_cast<size_t>(head) * head_dim * elem();
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

// Runs `fn` on one AttendJob; returns out[0, head_dim) and checks nothing past it was written.
std::vector<float> RunAttend(AttendHeadFn fn, const Pool& pool, const std::vector<float>& q,
                             int head) {
  std::vector<float> scores(AttentionScratchFloats(pool.n_keys, pool.head_dim));
  std::vector<float> out(pool.head_dim + 16, 7.0f);
  fn(pool.Job(q.data(), head, scores.data(), out.data()));
  for (int d = pool.head_dim; d < pool.head_dim + 16; ++d) {
    EXPECT_EQ(out[d], 7.0f) << "wrote past head_dim at " << d;
  }
  out.resize(pool.head_dim);
  return out;
}

std::vector<float> RandomQuery(int head_dim, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> q(head_dim);
  for (float& x : q) x = dist(rng);
  return q;
}

constexpr KvType kKvTypes[] = {KvType::kF32, KvType::kF16, KvType::kBF16};

TEST(AttendHeadTest, ScalarMatchesDoubleSoftmax) {
  std::mt19937 rng(5);
  for (KvType type : kKvTypes) {
    for (int head_dim : {8, 64, 80}) {
      for (int n_keys : {1, 2, 17, 100}) {
        SCOPED_TRACE(std::string(KvTypeName(type)) + " head_dim=" + std::to_string(head_dim) +
                     " n_keys=" + std::to_string(n_keys));
        const Pool pool(type, head_dim, 2, 16, n_keys, rng);
        const std::vector<float> q = RandomQuery(head_dim, 1.0f, rng);
        const std::vector<float> got = RunAttend(scalar::AttendHead, pool, q, 1);
        testing::ExpectNearDoubleAttention(pool, q, 1, 0, 0.0f, -INFINITY, got);
      }
    }
  }
}

TEST(AttendHeadTest, SimdMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(9);
  for (KvType type : kKvTypes) {
    for (int head_dim : {1, 8, 15, 16, 24, 64, 80, 128, 200, 256}) {
      for (int block_size : {16, 5, 32}) {
        for (int n_keys : {1, 3, 15, 16, 17, 31, 33, 64, 129}) {
          const Pool pool(type, head_dim, 2, block_size, n_keys, rng);
          // Large query values spread the softmax: some weights underflow to 0, one dominates.
          for (float q_scale : {0.3f, 8.0f}) {
            const std::vector<float> q = RandomQuery(head_dim, q_scale, rng);
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

TEST(AttendHeadTest, AttentionViewCallsTheKernel) {
  std::mt19937 rng(3);
  const Pool pool(KvType::kF16, 64, 4, 16, 40, rng);
  const std::vector<float> q = RandomQuery(64, 1.0f, rng);
  const std::vector<float> want = RunAttend(testing::TestCpuKernels().attend_head, pool, q, 2);
  const KvLayerView view = pool.View();
  std::vector<float> scratch(AttentionScratchFloats(pool.n_keys, pool.head_dim));
  std::vector<float> got(64);
  const float scale = 1.0f / std::sqrt(64.0f);  // what Pool::Job passes
  testing::TestCpuKernels().attend_head(AttentionJob(
      view, q.data(), 2, pool.block_table.data(), pool.n_keys, scale, got.data(), scratch.data()));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * 64), 0);
}

// ---- attend_group: several query heads of one token ------------------------------------------

// attend_group on query heads [first_head, first_head + n_jobs) of a pool with n_kv_heads KV heads
// and `group` query heads each: every job gets scalar::AttendHead's bits, with its own query, sink
// and bias, a window and a soft-cap, and writes nothing past head_dim.
void ExpectGroupMatchesHeads(const KernelTable& t, const Pool& pool, int group, int first_head,
                             int n_jobs, int first_key, float soft_cap, std::mt19937& rng) {
  const int head_dim = pool.head_dim;
  const int n_read = pool.n_keys - first_key;
  std::vector<std::vector<float>> q(n_jobs), bias(n_jobs), scores(n_jobs), out(n_jobs);
  std::vector<AttendJob> jobs;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int j = 0; j < n_jobs; ++j) {
    q[j] = RandomQuery(head_dim, 2.0f, rng);
    bias[j].resize(n_read);
    for (float& b : bias[j]) b = dist(rng);
    scores[j].assign(AttentionScratchFloats(n_read, head_dim), 0.0f);
    out[j].assign(head_dim + 16, 7.0f);
    AttendJob job =
        pool.Job(q[j].data(), (first_head + j) / group, scores[j].data(), out[j].data());
    job.first_key = first_key;
    job.soft_cap = soft_cap;
    job.sink = j % 2 == 0 ? dist(rng) : -INFINITY;
    job.bias = j % 3 == 1 ? bias[j].data() : nullptr;
    jobs.push_back(job);
  }
  t.attend_group(jobs);
  for (int j = 0; j < n_jobs; ++j) {
    SCOPED_TRACE("query head " + std::to_string(first_head + j));
    std::vector<float> want_scores(scores[j].size());
    std::vector<float> want(head_dim);
    AttendJob job = jobs[j];
    job.scores = want_scores.data();
    job.out = want.data();
    scalar::AttendHead(job);
    ASSERT_EQ(std::memcmp(out[j].data(), want.data(), sizeof(float) * head_dim), 0)
        << "first values " << out[j][0] << " vs " << want[0];
    for (int d = head_dim; d < head_dim + 16; ++d) {
      ASSERT_EQ(out[j][d], 7.0f) << "wrote past head_dim at " << d;
    }
  }
}

TEST(AttendGroupTest, EveryJobGetsAttendHeadsBitsOnEveryTable) {
  std::vector<const KernelTable*> tables = FastTables();
  tables.push_back(&ScalarKernels());
  std::mt19937 rng(41);
  for (KvType type : kKvTypes) {
    for (int head_dim : {24, 64, 80, 256}) {
      for (int block_size : {16, 5}) {
        for (int n_keys : {1, 17, 100}) {
          // 3 KV heads of 3 query heads each.
          const Pool pool(type, head_dim, 3, block_size, n_keys, rng);
          for (const KernelTable* t : tables) {
            SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) + " head_dim=" +
                         std::to_string(head_dim) + " block_size=" + std::to_string(block_size) +
                         " n_keys=" + std::to_string(n_keys));
            ExpectGroupMatchesHeads(*t, pool, 3, 0, 9, 0, 0.0f, rng);            // all, every key
            ExpectGroupMatchesHeads(*t, pool, 3, 2, 5, n_keys / 3, 30.0f, rng);  // a window
            ExpectGroupMatchesHeads(*t, pool, 3, 7, 1, 0, 0.0f, rng);            // one job
          }
        }
      }
    }
  }
}

// ---- Sliding window and soft-cap -------------------------------------------------------------

// As RunAttend, with keys first_key .. n_keys - 1 and a soft-cap.
std::vector<float> RunAttendLimited(AttendHeadFn fn, const Pool& pool, const std::vector<float>& q,
                                    int head, int first_key, float soft_cap, float sink = -INFINITY,
                                    const float* bias = nullptr) {
  std::vector<float> scores(AttentionScratchFloats(pool.n_keys - first_key, pool.head_dim));
  std::vector<float> out(pool.head_dim + 16, 7.0f);
  AttendJob job = pool.Job(q.data(), head, scores.data(), out.data());
  job.first_key = first_key;
  job.soft_cap = soft_cap;
  job.sink = sink;
  job.bias = bias;
  fn(job);
  for (int d = pool.head_dim; d < pool.head_dim + 16; ++d) {
    EXPECT_EQ(out[d], 7.0f) << "wrote past head_dim at " << d;
  }
  out.resize(pool.head_dim);
  return out;
}

TEST(AttendHeadWindowTest, ScalarMatchesDoubleSoftmax) {
  std::mt19937 rng(21);
  for (KvType type : kKvTypes) {
    for (int n_keys : {1, 9, 40}) {
      for (int window : {1, 8, 17, 64}) {
        for (float soft_cap : {0.0f, 2.0f, 50.0f}) {
          const int first = std::max(0, n_keys - window);
          SCOPED_TRACE(std::string(KvTypeName(type)) + " n_keys=" + std::to_string(n_keys) +
                       " window=" + std::to_string(window) +
                       " soft_cap=" + std::to_string(soft_cap));
          const int head_dim = 64;
          const Pool pool(type, head_dim, 2, 5, n_keys, rng);
          const std::vector<float> q = RandomQuery(head_dim, 2.0f, rng);
          const std::vector<float> got =
              RunAttendLimited(scalar::AttendHead, pool, q, 1, first, soft_cap);
          testing::ExpectNearDoubleAttention(pool, q, 1, first, soft_cap, -INFINITY, got);
        }
      }
    }
  }
}

TEST(AttendHeadWindowTest, SimdMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(23);
  for (KvType type : kKvTypes) {
    for (int head_dim : {8, 15, 64, 80, 256}) {
      for (int block_size : {16, 5}) {
        for (int n_keys : {1, 16, 17, 33, 129}) {
          const Pool pool(type, head_dim, 2, block_size, n_keys, rng);
          for (int window : {0, 1, 7, 16, 17, 40}) {
            const int first = window == 0 ? 0 : std::max(0, n_keys - window);
            for (float soft_cap : {0.0f, 1.5f, 50.0f}) {
              const std::vector<float> q = RandomQuery(head_dim, 4.0f, rng);
              const std::vector<float> want =
                  RunAttendLimited(scalar::AttendHead, pool, q, 1, first, soft_cap);
              for (const KernelTable* t : tables) {
                SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) +
                             " head_dim=" + std::to_string(head_dim) + " block_size=" +
                             std::to_string(block_size) + " n_keys=" + std::to_string(n_keys) +
                             " first=" + std::to_string(first) +
                             " soft_cap=" + std::to_string(soft_cap));
                const std::vector<float> got =
                    RunAttendLimited(t->attend_head, pool, q, 1, first, soft_cap);
                ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0)
                    << "first values " << got[0] << " vs " << want[0];
              }
            }
          }
        }
      }
    }
  }
}

// Keys before the window are never read: filling their K and V with NaN changes no bit, in any
// table (a read would turn the output into NaN).
TEST(AttendHeadWindowTest, ReadsOnlyTheWindow) {
  std::mt19937 rng(29);
  std::vector<const KernelTable*> tables = FastTables();
  tables.push_back(&ScalarKernels());
  const int n_keys = 45;
  const int first = 37;  // a window of 8, starting inside a block of 5
  Pool pool(KvType::kF32, 64, 2, 5, n_keys, rng);
  const std::vector<float> q = RandomQuery(64, 1.0f, rng);
  std::vector<std::vector<float>> clean;
  for (const KernelTable* t : tables) {
    clean.push_back(RunAttendLimited(t->attend_head, pool, q, 1, first, 50.0f));
  }
  for (int position = 0; position < first; ++position) {
    const size_t slot =
        static_cast<size_t>(pool.block_table[position / pool.block_size]) * pool.block_size +
        position % pool.block_size;
    for (size_t i = 0; i < pool.slot_bytes() / sizeof(float); ++i) {
      for (auto* bytes : {&pool.k, &pool.v}) {
        pool.Store(bytes->data(), slot * pool.slot_bytes() / sizeof(float) + i, NAN);
      }
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    SCOPED_TRACE(tables[i]->isa);
    const std::vector<float> got =
        RunAttendLimited(tables[i]->attend_head, pool, q, 1, first, 50.0f);
    EXPECT_EQ(std::memcmp(got.data(), clean[i].data(), sizeof(float) * 64), 0);
    EXPECT_FALSE(std::isnan(got[0]));
  }
}

// ---- Learned attention sinks (gpt-oss) ---------------------------------------------------------

// A sink s is a logit in the softmax's denominator with no value: out = sum_j e^(s_j - m) V_j /
// (sum_j e^(s_j - m) + e^(s - m)), m = max(max_j s_j, s); it is not soft-capped.
TEST(AttendHeadSinkTest, ScalarMatchesDoubleSoftmaxWithASink) {
  std::mt19937 rng(41);
  for (KvType type : kKvTypes) {
    for (int n_keys : {1, 9, 40}) {
      for (float sink : {-4.0f, 0.3f, 2.5f, 30.0f}) {
        for (float soft_cap : {0.0f, 2.0f}) {
          SCOPED_TRACE(std::string(KvTypeName(type)) + " n_keys=" + std::to_string(n_keys) +
                       " sink=" + std::to_string(sink) + " soft_cap=" + std::to_string(soft_cap));
          const int head_dim = 64, first = n_keys > 8 ? 3 : 0;
          const Pool pool(type, head_dim, 2, 5, n_keys, rng);
          const std::vector<float> q = RandomQuery(head_dim, 2.0f, rng);
          const std::vector<float> got =
              RunAttendLimited(scalar::AttendHead, pool, q, 1, first, soft_cap, sink);
          testing::ExpectNearDoubleAttention(pool, q, 1, first, soft_cap, sink, got);
        }
      }
    }
  }
}

TEST(AttendHeadSinkTest, SimdMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(43);
  for (KvType type : kKvTypes) {
    for (int head_dim : {15, 64, 256}) {
      for (int n_keys : {1, 17, 129}) {
        const Pool pool(type, head_dim, 2, 16, n_keys, rng);
        for (float sink : {-INFINITY, -6.0f, 0.0f, 1.7f, 40.0f}) {
          const int first = n_keys > 16 ? n_keys - 16 : 0;
          const std::vector<float> q = RandomQuery(head_dim, 4.0f, rng);
          const std::vector<float> want =
              RunAttendLimited(scalar::AttendHead, pool, q, 1, first, 0.0f, sink);
          for (const KernelTable* t : tables) {
            SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) +
                         " head_dim=" + std::to_string(head_dim) +
                         " n_keys=" + std::to_string(n_keys) + " sink=" + std::to_string(sink));
            const std::vector<float> got =
                RunAttendLimited(t->attend_head, pool, q, 1, first, 0.0f, sink);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0);
          }
        }
      }
    }
  }
}

// The backend passes each query head its own sink (AttentionParams::sinks, indexed by query head,
// not KV head); with no sinks the output is the one without, bit for bit.
TEST(AttendHeadSinkTest, PagedAttentionGivesEachHeadItsSink) {
  std::mt19937 rng(47);
  constexpr int kHeads = 4;
  const int n_kv_heads = 2, head_dim = 64, n_keys = 21;
  const Pool pool(KvType::kF32, head_dim, n_kv_heads, 16, n_keys, rng);
  const KvLayerView view = pool.View();
  std::vector<float> q;
  for (int h = 0; h < kHeads; ++h) {
    const std::vector<float> row = RandomQuery(head_dim, 2.0f, rng);
    q.insert(q.end(), row.begin(), row.end());
  }
  const std::vector<int32_t> positions = {n_keys - 1}, seq_index = {0};
  const std::vector<std::vector<int32_t>> tables = {pool.block_table};
  const AttentionBatch batch{
      .positions = positions, .seq_index = seq_index, .block_tables = tables};
  const float sinks[kHeads] = {-1.0f, 0.5f, 3.0f, -INFINITY};
  const Backend& backend = TestBackend();
  auto ws = backend.NewWorkspace({});
  AttentionParams params{.scale = 1.0f / std::sqrt(static_cast<float>(head_dim))};
  std::vector<float> plain(kHeads * head_dim), sunk(kHeads * head_dim);
  backend.PagedAttention(view, batch, q.data(), kHeads, params, plain.data(), *ws);
  params.sinks = sinks;
  backend.PagedAttention(view, batch, q.data(), kHeads, params, sunk.data(), *ws);
  for (int h = 0; h < kHeads; ++h) {
    const std::vector<float> head_q(q.begin() + h * head_dim, q.begin() + (h + 1) * head_dim);
    const std::vector<float> want = RunAttendLimited(testing::TestCpuKernels().attend_head, pool,
                                                     head_q, h / 2, 0, 0.0f, sinks[h]);
    EXPECT_EQ(std::memcmp(sunk.data() + h * head_dim, want.data(), sizeof(float) * head_dim), 0)
        << "head " << h;
    const bool same = std::memcmp(sunk.data() + h * head_dim, plain.data() + h * head_dim,
                                  sizeof(float) * head_dim) == 0;
    EXPECT_EQ(same, sinks[h] == -INFINITY) << "head " << h;
  }
}

// ---- Position bias and non-causal key counts (T5) ----------------------------------------------

std::vector<float> RandomBias(int n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> bias(n);
  for (float& x : bias) x = dist(rng);
  return bias;
}

TEST(AttendHeadBiasTest, ScalarMatchesDoubleSoftmax) {
  std::mt19937 rng(51);
  for (KvType type : kKvTypes) {
    for (int n_keys : {1, 9, 40}) {
      const Pool pool(type, 48, 2, 8, n_keys, rng);
      for (int first : {0, n_keys / 2}) {
        for (float soft_cap : {0.0f, 3.0f}) {
          SCOPED_TRACE(std::string(KvTypeName(type)) + " n_keys=" + std::to_string(n_keys) +
                       " first=" + std::to_string(first) + " cap=" + std::to_string(soft_cap));
          const std::vector<float> q = RandomQuery(48, 2.0f, rng);
          const std::vector<float> bias = RandomBias(n_keys - first, 4.0f, rng);
          const std::vector<float> got = RunAttendLimited(scalar::AttendHead, pool, q, 1, first,
                                                          soft_cap, -INFINITY, bias.data());
          testing::ExpectNearDoubleAttention(pool, q, 1, first, soft_cap, -INFINITY, got,
                                             bias.data());
        }
      }
    }
  }
}

TEST(AttendHeadBiasTest, SimdMatchesScalarBitwise) {
  const auto tables = FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  std::mt19937 rng(53);
  for (KvType type : kKvTypes) {
    for (int head_dim : {15, 64, 256}) {
      for (int n_keys : {1, 17, 129}) {
        const Pool pool(type, head_dim, 2, 16, n_keys, rng);
        for (int first : {0, n_keys > 16 ? n_keys - 16 : 0}) {
          const std::vector<float> q = RandomQuery(head_dim, 4.0f, rng);
          const std::vector<float> bias = RandomBias(n_keys - first, 8.0f, rng);
          const std::vector<float> want =
              RunAttendLimited(scalar::AttendHead, pool, q, 1, first, 0.0f, 0.5f, bias.data());
          for (const KernelTable* t : tables) {
            SCOPED_TRACE(std::string(t->isa) + " " + KvTypeName(type) + " head_dim=" +
                         std::to_string(head_dim) + " n_keys=" + std::to_string(n_keys));
            const std::vector<float> got =
                RunAttendLimited(t->attend_head, pool, q, 1, first, 0.0f, 0.5f, bias.data());
            ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * head_dim), 0);
          }
        }
      }
    }
  }
}

// PagedAttention looks each head's bias up by key distance (AttentionParams::position_bias), and
// with key_counts every query of a sequence reads all its keys whatever its position; a query at
// the last position, causal, reads the same keys and so gives the same bits.
TEST(AttendHeadBiasTest, PagedAttentionLooksUpDistancesAndReadsKeyCounts) {
  std::mt19937 rng(57);
  constexpr int kHeads = 2;
  const int head_dim = 32, n_keys = 19;
  const Pool pool(KvType::kF32, head_dim, 1, 8, n_keys, rng);
  const KvLayerView view = pool.View();
  const std::vector<float> q0 = RandomQuery(head_dim, 2.0f, rng);
  const std::vector<float> q1 = RandomQuery(head_dim, 2.0f, rng);
  std::vector<float> q(q0);
  q.insert(q.end(), q1.begin(), q1.end());
  q.insert(q.end(), q.begin(), q.end());  // tokens 0 and 1: the same two heads
  // Distances -(n_keys - 1) .. n_keys - 1 for each head.
  const int width = 2 * n_keys - 1, zero = n_keys - 1;
  const std::vector<float> table = RandomBias(kHeads * width, 4.0f, rng);
  const std::vector<int32_t> positions = {4, n_keys - 1}, seq_index = {0, 0};
  const std::vector<int32_t> key_counts = {n_keys};
  const std::vector<std::vector<int32_t>> tables = {pool.block_table};
  const Backend& backend = TestBackend();
  auto ws = backend.NewWorkspace({});
  const AttentionParams params{.scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                               .position_bias = table.data(),
                               .bias_width = width,
                               .bias_zero = zero};
  std::vector<float> all(2 * kHeads * head_dim), causal(2 * kHeads * head_dim);
  backend.PagedAttention(view,
                         {.positions = positions,
                          .seq_index = seq_index,
                          .block_tables = tables,
                          .key_counts = key_counts},
                         q.data(), kHeads, params, all.data(), *ws);
  backend.PagedAttention(view,
                         {.positions = positions, .seq_index = seq_index, .block_tables = tables},
                         q.data(), kHeads, params, causal.data(), *ws);
  for (int i = 0; i < 2; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      SCOPED_TRACE("token " + std::to_string(i) + " head " + std::to_string(h));
      const float* bias = table.data() + h * width + zero - positions[i];
      const std::vector<float> want =
          RunAttendLimited(testing::TestCpuKernels().attend_head, pool, h == 0 ? q0 : q1, 0, 0,
                           0.0f, -INFINITY, bias);
      const size_t offset = (static_cast<size_t>(i) * kHeads + h) * head_dim;
      EXPECT_EQ(std::memcmp(all.data() + offset, want.data(), sizeof(float) * head_dim), 0);
      testing::ExpectNearDoubleAttention(
          pool, h == 0 ? q0 : q1, 0, 0, 0.0f, -INFINITY,
          std::vector<float>(all.begin() + offset, all.begin() + offset + head_dim), bias);
      const bool same =
          std::memcmp(causal.data() + offset, want.data(), sizeof(float) * head_dim) == 0;
      EXPECT_EQ(same, positions[i] == n_keys - 1);
    }
  }
}

}  // namespace
}  // namespace kvserve
