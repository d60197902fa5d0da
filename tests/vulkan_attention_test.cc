// vulkan_attention_test: the Vulkan backend's StoreKv and PagedAttention (vulkan_attention.h,
// shaders store_kv.comp and paged_attention.comp) against the CPU backend, each over KV pools
// from its own allocator(), on whatever Vulkan device is device 0 (lavapipe in CI).
// - StoreKv writes the CPU's bytes (f32 copied, f16 and bf16 rounded to nearest even, q8_0 and
//   q4_0 quantized as EncodeKvHead: scales, codes, ties, NaN, infinities), edge values too, for
//   head rows of any alignment.
// - PagedAttention over odd shapes (head_dim 24 and 64, 6 query heads on 2 KV heads, blocks of 16
//   and 5, three sequences with shuffled block tables), with a window, a soft-cap, sinks, a
//   position bias and key counts, is within a bound from float arithmetic of the CPU.
// - A token's output is the same bits alone and in a batch of 16, and after a prefix hit (its keys
//   with the same values in other physical blocks).
// - Every KvType runs on the device; the quantized ones dequantize exactly as the CPU does, so the
//   same bound holds. Head sizes not a multiple of 4 run on the CPU backend: its bits.
// A build without the backend skips; a build with it fails without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_format.h"
#include "kv/kv_layer_view.h"
#include "support/vulkan_backends.h"
#include "util/half.h"

namespace kvserve {
namespace {

using testing::GetBackends;

constexpr double kEps = std::numeric_limits<float>::epsilon();

std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = normal(rng);
  return out;
}

struct Shape {
  KvType type = KvType::kF32;
  int head_dim = 64;
  int n_heads = 6;
  int n_kv_heads = 2;
  int block_size = 16;
  int window = 0;
  float soft_cap = 0.0f;
  bool sinks = false;
  bool bias = false;
  bool key_counts = false;  // non-causal: every token reads all its sequence's keys

  int row() const { return n_kv_heads * head_dim; }
  std::string Name() const {
    return std::string(KvTypeName(type)) + " head_dim " + std::to_string(head_dim) + " block " +
           std::to_string(block_size) + " window " + std::to_string(window) + " cap " +
           std::to_string(soft_cap) + (sinks ? " sinks" : "") + (bias ? " bias" : "") +
           (key_counts ? " key_counts" : "");
  }
};

// Sequences of the given lengths in a pool of shuffled blocks (two spare), with every token's
// K and V rows side by side in `rows` (stride floats apart: K, a gap, V, a gap).
struct Sequences {
  std::vector<int> lengths;
  std::vector<std::vector<int32_t>> tables;
  int n_blocks = 0;
  size_t stride = 0;
  std::vector<float> rows;          // [n_tokens, stride]
  std::vector<int64_t> slots;       // [n_tokens], sequence after sequence
  std::vector<int32_t> positions;   // [n_tokens]
  std::vector<int32_t> seq_index;   // [n_tokens]
  std::vector<int32_t> key_counts;  // [n_sequences]: the lengths

  Sequences(const Shape& s, std::vector<int> lengths_, std::mt19937& rng)
      : lengths(std::move(lengths_)), stride(2 * s.row() + 5) {
    for (int length : lengths) n_blocks += (length + s.block_size - 1) / s.block_size;
    n_blocks += 2;
    std::vector<int32_t> order(n_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t next = 0;
    for (size_t q = 0; q < lengths.size(); ++q) {
      const int blocks = (lengths[q] + s.block_size - 1) / s.block_size;
      tables.emplace_back(order.begin() + next, order.begin() + next + blocks);
      next += blocks;
      key_counts.push_back(lengths[q]);
      for (int p = 0; p < lengths[q]; ++p) {
        slots.push_back(KvSlot(tables.back().data(), s.block_size, p));
        positions.push_back(p);
        seq_index.push_back(static_cast<int32_t>(q));
      }
    }
    rows = RandomFloats(positions.size() * stride, rng);
  }
  size_t n_tokens() const { return positions.size(); }
};

// One layer's K and V pools from `backend`'s allocator (device memory for Vulkan).
struct Layer {
  Buffer k;
  Buffer v;
  KvLayerView view;

  Layer(const Backend& backend, const Shape& s, int n_blocks) {
    view = {.type = s.type,
            .block_size = s.block_size,
            .n_kv_heads = s.n_kv_heads,
            .head_dim = s.head_dim};
    const size_t bytes = static_cast<size_t>(n_blocks) * s.block_size * view.slot_bytes();
    k = backend.allocator().AllocateZeroed(bytes);
    v = backend.allocator().AllocateZeroed(bytes);
    view.k = k.data();
    view.v = v.data();
  }
};

// Floats in `ws`'s buffer `id` holding `values` (device memory for Vulkan).
float* InWorkspace(const Backend& backend, Workspace& ws, int id,
                   const std::vector<float>& values) {
  float* p = ws.Floats(id, values.size());
  testing::WriteDevice(backend, values, p);
  return p;
}

// StoreKv of every token of `seqs` into `layer` (K at row offset 0, V at row + 2).
void StoreAll(const Backend& backend, Workspace& ws, const Layer& layer, const Shape& s,
              const Sequences& seqs, std::span<const int64_t> slots) {
  const float* rows = InWorkspace(backend, ws, 0, seqs.rows);
  backend.StoreKv(layer.view, slots, rows, rows + s.row() + 2, seqs.stride, ws);
}

// A layer on each backend, every token of `seqs` stored into both, and the pools' byte count.
struct StoredOnBoth {
  std::unique_ptr<Workspace> vws;
  std::unique_ptr<Workspace> cws;
  Layer on_vulkan;
  Layer on_cpu;
  size_t pool_bytes;

  StoredOnBoth(const testing::VulkanAndCpu& b, const Shape& s, const Sequences& seqs)
      : vws(b.vulkan->NewWorkspace({})),
        cws(b.cpu->NewWorkspace({})),
        on_vulkan(*b.vulkan, s, seqs.n_blocks),
        on_cpu(*b.cpu, s, seqs.n_blocks),
        pool_bytes(static_cast<size_t>(seqs.n_blocks) * s.block_size * on_cpu.view.slot_bytes()) {
    StoreAll(*b.vulkan, *vws, on_vulkan, s, seqs, seqs.slots);
    StoreAll(*b.cpu, *cws, on_cpu, s, seqs, seqs.slots);
  }
  bool SamePools(const testing::VulkanAndCpu& b) const {
    // Read through the allocator: the Vulkan backend's recorded stores run first.
    const auto bytes = [&](const Backend& backend, const Buffer& pool) {
      std::vector<uint8_t> out(pool_bytes);
      backend.allocator().CopyToHost(pool.data(), pool_bytes, out.data());
      return out;
    };
    return bytes(*b.vulkan, on_vulkan.k) == bytes(*b.cpu, on_cpu.k) &&
           bytes(*b.vulkan, on_vulkan.v) == bytes(*b.cpu, on_cpu.v);
  }
};

// The attention parameters of a shape, their tables drawn from rng. bias_table: [n_heads, width]
// covering distances -(max_length - 1) .. max_length - 1.
struct Params {
  std::vector<float> sinks;
  std::vector<float> bias_table;
  AttentionParams params;

  Params(const Shape& s, int max_length, std::mt19937& rng) {
    params.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    params.window = s.window;
    params.soft_cap = s.soft_cap;
    if (s.sinks) {
      sinks = RandomFloats(s.n_heads, rng, 1.5f);
      sinks[1] = -INFINITY;  // a head without one
      params.sinks = sinks.data();
    }
    if (s.bias) {
      const int width = 2 * max_length - 1;
      std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
      bias_table.resize(static_cast<size_t>(s.n_heads) * width);
      for (float& b : bias_table) b = uniform(rng);
      params.position_bias = bias_table.data();
      params.bias_width = width;
      params.bias_zero = max_length - 1;
    }
  }
};

std::vector<float> Attend(const Backend& backend, Workspace& ws, const Layer& layer,
                          const AttentionBatch& batch, const std::vector<float>& q, int n_heads,
                          const AttentionParams& params) {
  const float* q_in = InWorkspace(backend, ws, 1, q);
  float* out = InWorkspace(backend, ws, 2, std::vector<float>(q.size(), NAN));
  backend.PagedAttention(layer.view, batch, q_in, n_heads, params, out, ws);
  return testing::ReadDevice(backend, out, q.size());
}

// How far a float attention output may be from the exact one, per element of head `h` of token
// i: the scores' roundings (a dot product of head_dim terms in 16 lanes, the scale, the bias, the
// soft-cap's tanh to ~1e-7 of the cap) move each weight by about that much relatively; exp (2e-7
// relative), the sums over the keys and the weighted values add n_keys roundings. Both times the
// weighted magnitude sum_j w_j |v_j|, computed in double from the stored values. For q8_0 and q4_0
// the stored values are the decoded ones (scale * code, exact in float), which both backends
// compute before any rounding, so the bound is the float types' with those values.
std::vector<double> Bound(const Shape& s, const KvLayerView& kv, const AttentionBatch& batch,
                          const float* q, const AttentionParams& params, size_t i, int h) {
  // The stored head row of key `position`, decoded exactly (every type): [head_dim].
  std::vector<float> decoded(s.head_dim);
  auto head_row = [&](const uint8_t* pool, int position) -> const std::vector<float>& {
    const size_t slot =
        KvSlot(batch.block_tables[batch.seq_index[i]].data(), s.block_size, position);
    const size_t kv_head = static_cast<size_t>(h / (s.n_heads / s.n_kv_heads));
    DecodeKvHead(s.type, pool + slot * kv.slot_bytes() + kv_head * kv.head_bytes(), s.head_dim,
                 decoded.data());
    return decoded;
  };
  const int position = batch.positions[i];
  const bool causal = batch.key_counts.empty();
  const int end = causal ? position + 1 : batch.key_counts[batch.seq_index[i]];
  const int first = causal && s.window > 0 ? std::max(0, position - s.window + 1) : 0;
  std::vector<double> score(end - first);
  double magnitude_of_scores = 0;
  double max_score = params.sinks != nullptr ? params.sinks[h] : -INFINITY;
  for (int j = first; j < end; ++j) {
    double dot = 0;
    double terms = 0;
    const std::vector<float>& k = head_row(kv.k, j);
    for (int d = 0; d < s.head_dim; ++d) {
      dot += double{q[d]} * k[d];
      terms += std::fabs(double{q[d]} * k[d]);
    }
    double x = dot * params.scale;
    if (params.position_bias != nullptr) {
      x += params.position_bias[h * params.bias_width + params.bias_zero + j - position];
    }
    magnitude_of_scores = std::max(magnitude_of_scores, terms * params.scale + std::fabs(x));
    if (params.soft_cap > 0) x = std::tanh(x / params.soft_cap) * params.soft_cap;
    score[j - first] = x;
    max_score = std::max(max_score, x);
  }
  double sum = params.sinks != nullptr ? std::exp(params.sinks[h] - max_score) : 0.0;
  for (double& x : score) sum += (x = std::exp(x - max_score));
  const double score_error = (s.head_dim / 16.0 + 8) * 2 * kEps * magnitude_of_scores +
                             (params.soft_cap > 0 ? 2e-7 * params.soft_cap : 0.0);
  const double relative = 2 * score_error + (end - first + 64) * 4 * kEps;
  std::vector<double> weighted(s.head_dim, 0.0);
  for (int j = first; j < end; ++j) {
    const std::vector<float>& v = head_row(kv.v, j);
    for (int d = 0; d < s.head_dim; ++d) weighted[d] += score[j - first] / sum * std::fabs(v[d]);
  }
  std::vector<double> bound(s.head_dim);
  for (int d = 0; d < s.head_dim; ++d) bound[d] = relative * weighted[d] + 1e-30;
  return bound;
}

// Stores three sequences on both backends (the pools' bytes must agree), attends every token,
// and compares the outputs within twice the bound (each backend's own error).
void CheckAgainstCpu(const Shape& s, uint32_t seed) {
  SCOPED_TRACE(s.Name());
  const testing::VulkanAndCpu& b = GetBackends();
  std::mt19937 rng(seed);
  const Sequences seqs(s, {37, 5, 130}, rng);  // up to three tiles of 64 keys
  const Params p(s, 130, rng);
  const StoredOnBoth stored(b, s, seqs);
  EXPECT_TRUE(stored.SamePools(b)) << "the K or V pools differ";
  const Layer& on_vulkan = stored.on_vulkan;
  const Layer& on_cpu = stored.on_cpu;
  Workspace& vws = *stored.vws;
  Workspace& cws = *stored.cws;

  AttentionBatch batch{
      .positions = seqs.positions, .seq_index = seqs.seq_index, .block_tables = seqs.tables};
  if (s.key_counts) batch.key_counts = seqs.key_counts;
  const size_t width = static_cast<size_t>(s.n_heads) * s.head_dim;
  const std::vector<float> q = RandomFloats(seqs.n_tokens() * width, rng, 1.5f);
  const std::vector<float> gpu = Attend(*b.vulkan, vws, on_vulkan, batch, q, s.n_heads, p.params);
  const std::vector<float> cpu = Attend(*b.cpu, cws, on_cpu, batch, q, s.n_heads, p.params);
  double worst = 0;  // the largest |gpu - cpu| / bound
  double largest_difference = 0;
  double output_scale = 0;
  int bad = 0;
  for (size_t i = 0; i < seqs.n_tokens() && bad < 5; ++i) {
    for (int h = 0; h < s.n_heads && bad < 5; ++h) {
      const size_t at = i * width + static_cast<size_t>(h) * s.head_dim;
      const std::vector<double> bound = Bound(s, on_cpu.view, batch, q.data() + at, p.params, i, h);
      for (int d = 0; d < s.head_dim; ++d) {
        const double diff = std::fabs(double{gpu[at + d]} - cpu[at + d]);
        largest_difference = std::max(largest_difference, diff);
        output_scale = std::max(output_scale, std::fabs(double{cpu[at + d]}));
        worst = std::max(worst, diff / (2 * bound[d]));
        if (!(diff <= 2 * bound[d])) {
          ADD_FAILURE() << "token " << i << " head " << h << " d " << d << ": " << gpu[at + d]
                        << " vs cpu " << cpu[at + d] << " (bound " << 2 * bound[d] << ")";
          ++bad;
          break;
        }
      }
    }
  }
  // Both backends round differently only in the softmax's order and the device's exp and tanh:
  // in practice far inside the bound, and within 1e-5 of the output's scale.
  EXPECT_LE(largest_difference, 1e-5 * output_scale);
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), "%.3g of the bound, %.3g of the output scale", worst,
                largest_difference / output_scale);
  ::testing::Test::RecordProperty("largest difference " + s.Name(), numbers);
}

TEST(VulkanAttention, AgreesWithTheCpuOverOddShapesAndEveryParameter) {
  REQUIRE_VULKAN();
  uint32_t seed = 1;
  for (KvType type : kAllKvTypes) {
    const Shape shapes[] = {
        {.type = type, .head_dim = 64, .block_size = 16},
        {.type = type, .head_dim = 24, .block_size = 5, .window = 7},
        {.type = type, .head_dim = 44, .block_size = 16, .window = 30},  // a short last group
        {.type = type, .head_dim = 64, .block_size = 5, .window = 20, .soft_cap = 30.0f},
        {.type = type, .head_dim = 24, .block_size = 16, .soft_cap = 2.0f, .sinks = true},
        {.type = type, .head_dim = 64, .block_size = 16, .window = 9, .bias = true},
        {.type = type, .head_dim = 24, .block_size = 5, .bias = true, .key_counts = true},
        {.type = type,
         .head_dim = 64,
         .block_size = 5,
         .soft_cap = 5.0f,
         .sinks = true,
         .key_counts = true},
    };
    for (const Shape& s : shapes) CheckAgainstCpu(s, seed++);
  }
}

TEST(VulkanAttention, StoreKvWritesTheCpuBytesForEdgeValues) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  // f16: subnormals, a tie to even at the smallest subnormal, the largest finite value and past
  // it, signed zeros, NaN and infinities; the rest random.
  const float kEdges[] = {0.0f,      -0.0f,          1e-8f,   2.9802322e-8f, 5.9604645e-8f,
                          6e-8f,     -3e-7f,         6.1e-5f, 65504.0f,      65519.0f,
                          65520.0f,  1e30f,          -1e30f,  NAN,           INFINITY,
                          -INFINITY, 1.00048828125f, 2049.0f, 1e-40f,        -6.0975552e-5f};
  // The quantizers: a group whose scale is 1 for q8_0 (largest magnitude 127) and one whose scale
  // is 1 for q4_0 (largest value -8), so x * (1 / d) = x and the halves are ties (rounded away
  // from zero), values past the clamp, NaN; a group of zeros, one of tiny values (the f16 scale
  // rounds to 0, the codes do not) and one of large ones.
  const float kQ8Ties[] = {127.0f, 0.5f, 1.5f, -2.5f, -0.5f, 126.5f, -126.5f, NAN, -0.0f, 63.5f};
  const float kQ4Ties[] = {-8.0f, 0.5f, 1.5f, -2.5f, -0.5f, 7.5f, 6.5f, -7.5f, NAN, 2.5f, 3.5f};
  for (KvType type : kAllKvTypes) {
    // head_dim 24: head rows of 26 (q8_0) and 14 (q4_0) bytes, so slots straddle 32-bit words;
    // 7: q4_0's last byte has an empty high nibble; 45: a short second group.
    for (int head_dim : {24, 7, 45}) {
      if (!KvTypeIsQuantized(type) && head_dim != 24) continue;  // f16/bf16: even rows only
      const Shape s{
          .type = type, .head_dim = head_dim, .n_heads = 2, .n_kv_heads = 2, .block_size = 5};
      SCOPED_TRACE(s.Name());
      std::mt19937 rng(7);
      Sequences seqs(s, {9, 3}, rng);
      auto put = [&](size_t token, size_t at, std::span<const float> values, float scale = 1) {
        const size_t end = at < static_cast<size_t>(s.row()) ? s.row() : 2 * s.row() + 2;  // K, V
        for (size_t e = 0; e < values.size() && at + e < end; ++e) {
          seqs.rows[token * seqs.stride + at + e] = values[e] * scale;
        }
      };
      put(0, 0, kEdges);
      put(1, s.row() + 2, kEdges);  // V
      put(2, 0, kQ8Ties);
      put(2, s.row() + 2 + head_dim, kQ4Ties);  // V, head 1
      put(3, 0, std::vector<float>(kKvQuantGroup, 0.0f));
      put(4, 0, kQ4Ties, 1e-30f);
      put(5, s.row() + 2, kQ8Ties, 1e30f);
      put(6, head_dim, kQ4Ties);  // K, head 1
      EXPECT_TRUE(StoredOnBoth(b, s, seqs).SamePools(b));
    }
  }
}

// Token i alone (a batch of one, with only its sequence's table) gives the bits it gets in a
// batch of 16 tokens of three sequences.
TEST(VulkanAttention, ATokenIsTheSameBitsAloneAndInABatchOf16) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  for (KvType type : kAllKvTypes) {
    const Shape s{.type = type,
                  .head_dim = 64,
                  .block_size = 5,
                  .window = 150,
                  .soft_cap = 20.0f,
                  .sinks = true,
                  .bias = true};
    SCOPED_TRACE(s.Name());
    std::mt19937 rng(11);
    const Sequences seqs(s, {37, 5, 200}, rng);  // up to three tiles of 64 keys
    const Params p(s, 200, rng);
    auto ws = vulkan.NewWorkspace({});
    const Layer layer(vulkan, s, seqs.n_blocks);
    StoreAll(vulkan, *ws, layer, s, seqs, seqs.slots);
    // 16 tokens of the three sequences: a prefill's and decodes' mix.
    const std::vector<size_t> picked = {0,   3,   36,  37,  38,  41,  42,  43,
                                        106, 107, 150, 190, 200, 240, 241, 20};
    std::vector<int32_t> positions;
    std::vector<int32_t> seq_index;
    for (size_t t : picked) {
      positions.push_back(seqs.positions[t]);
      seq_index.push_back(seqs.seq_index[t]);
    }
    const size_t width = static_cast<size_t>(s.n_heads) * s.head_dim;
    const std::vector<float> q = RandomFloats(picked.size() * width, rng, 1.5f);
    const std::vector<float> batched =
        Attend(vulkan, *ws, layer,
               {.positions = positions, .seq_index = seq_index, .block_tables = seqs.tables}, q,
               s.n_heads, p.params);
    for (size_t i = 0; i < picked.size(); ++i) {
      const std::vector<int32_t> position = {positions[i]};
      const std::vector<int32_t> first_sequence = {0};
      const std::vector<std::vector<int32_t>> table = {seqs.tables[seq_index[i]]};
      const std::vector<float> q_i(q.begin() + i * width, q.begin() + (i + 1) * width);
      const std::vector<float> alone =
          Attend(vulkan, *ws, layer,
                 {.positions = position, .seq_index = first_sequence, .block_tables = table}, q_i,
                 s.n_heads, p.params);
      EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + i * width, sizeof(float) * width))
          << "token " << i << " (position " << positions[i] << ")";
    }
  }
}

// A prefix hit: sequence 1 holds sequence 0's keys and values in other physical blocks, sequence
// 2 shares sequence 0's first block and holds the rest elsewhere. The same query at the same
// position gives the same bits over each of them, causal and with key counts.
TEST(VulkanAttention, KeysInOtherBlocksGiveTheSameBits) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  for (KvType type : kAllKvTypes) {
    for (bool key_counts : {false, true}) {
      const Shape s{.type = type,
                    .head_dim = 24,
                    .block_size = 16,
                    .window = 80,
                    .soft_cap = 10.0f,
                    .sinks = true,
                    .bias = true,
                    .key_counts = key_counts};
      SCOPED_TRACE(s.Name());
      std::mt19937 rng(13);
      const int length = 100;  // two tiles of 64 keys
      Sequences seqs(s, {length, length, length}, rng);
      seqs.tables[2][0] = seqs.tables[0][0];  // the shared first block; its own one is spare
      const size_t row_floats = seqs.stride * length;
      for (int copy : {1, 2}) {
        std::copy_n(seqs.rows.begin(), row_floats, seqs.rows.begin() + copy * row_floats);
        for (int pos = 0; pos < length; ++pos) {
          seqs.slots[copy * length + pos] = KvSlot(seqs.tables[copy].data(), s.block_size, pos);
        }
      }
      const Params p(s, length, rng);
      auto ws = vulkan.NewWorkspace({});
      const Layer layer(vulkan, s, seqs.n_blocks);
      StoreAll(vulkan, *ws, layer, s, seqs, seqs.slots);
      AttentionBatch batch{
          .positions = seqs.positions, .seq_index = seqs.seq_index, .block_tables = seqs.tables};
      if (key_counts) batch.key_counts = seqs.key_counts;
      const size_t width = static_cast<size_t>(s.n_heads) * s.head_dim;
      const std::vector<float> q0 = RandomFloats(length * width, rng, 1.5f);
      std::vector<float> q;
      for (int copy = 0; copy < 3; ++copy) q.insert(q.end(), q0.begin(), q0.end());
      const std::vector<float> out = Attend(vulkan, *ws, layer, batch, q, s.n_heads, p.params);
      const size_t bytes = sizeof(float) * length * width;
      EXPECT_EQ(0, std::memcmp(out.data(), out.data() + length * width, bytes)) << "other blocks";
      EXPECT_EQ(0, std::memcmp(out.data(), out.data() + 2 * length * width, bytes))
          << "a shared first block";
    }
  }
}

// Attention over a head_dim that is not a multiple of 4 has no shader: PagedAttention runs on the
// CPU backend over the device memory and gives the CPU backend's bits (the rows of 30 are stored
// on the device, every type, with the CPU's bytes).
TEST(VulkanAttention, HeadSizesNotAMultipleOf4RunOnTheCpuWithItsBits) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  for (KvType type : kAllKvTypes) {
    const int head_dim = 30;
    const Shape s{
        .type = type, .head_dim = head_dim, .block_size = 16, .window = 20, .sinks = true};
    SCOPED_TRACE(s.Name());
    std::mt19937 rng(17);
    const Sequences seqs(s, {37, 5}, rng);
    const Params p(s, 37, rng);
    const StoredOnBoth stored(b, s, seqs);
    EXPECT_TRUE(stored.SamePools(b));
    const AttentionBatch batch{
        .positions = seqs.positions, .seq_index = seqs.seq_index, .block_tables = seqs.tables};
    const std::vector<float> q = RandomFloats(seqs.n_tokens() * s.n_heads * s.head_dim, rng, 1.5f);
    EXPECT_EQ(Attend(*b.vulkan, *stored.vws, stored.on_vulkan, batch, q, s.n_heads, p.params),
              Attend(*b.cpu, *stored.cws, stored.on_cpu, batch, q, s.n_heads, p.params));
  }
}

}  // namespace
}  // namespace kvserve
