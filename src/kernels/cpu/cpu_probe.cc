#include "kernels/cpu/cpu_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <random>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "util/large_memory.h"

namespace kvserve {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Measurement Summarize(const std::vector<double>& values) {
  Measurement m;
  m.repeats = static_cast<int>(values.size());
  for (double v : values) {
    m.best = std::max(m.best, v);
    m.mean += v / values.size();
  }
  return m;
}

// Reads n floats once through the active kernel table's dot product (its widest loads), a with
// itself, so the second operand hits the cache line just loaded: one memory stream. Chunks keep
// the count within an int.
double ReadFloats(const KernelTable& kernels, const float* p, size_t n) {
  constexpr size_t kChunk = 1 << 20;
  double sum = 0;
  for (size_t i = 0; i < n; i += kChunk) {
    const int len = static_cast<int>(std::min(kChunk, n - i));
    sum += kernels.dot_f32(p + i, p + i, len);
  }
  return sum;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A row-major n_out × n_in matrix of random weights in `type`.
std::vector<uint8_t> RandomWeights(GgmlType type, int n_out, int n_in, uint32_t seed) {
  const size_t row_bytes = RowBytes(type, n_in);
  std::vector<uint8_t> bytes(row_bytes * n_out);
  std::vector<float> row;
  for (int r = 0; r < n_out; ++r) {
    row = RandomFloats(n_in, seed + r);
    QuantizeRow(type, row.data(), n_in, bytes.data() + row_bytes * r);
  }
  return bytes;
}

bool IsBlock(GgmlType type) { return TraitsOf(type).block_elements > 1; }

KernelCheck CheckMatmul(const KernelTable& kernels, GgmlType type) {
  constexpr int kM = 3, kN = 37, kK = 256;
  const std::vector<uint8_t> w = RandomWeights(type, kN, kK, 11);
  const size_t w_row_bytes = RowBytes(type, kK);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(kM) * kK, 7);
  // Block types take the activations as Q8_0, quantized once by the scalar twin for both sides.
  std::vector<BlockQ8_0> xq(static_cast<size_t>(kM) * kK / kQ8_0BlockSize);
  std::vector<float> x_used = x;
  const uint8_t* x_bytes = reinterpret_cast<const uint8_t*>(x.data());
  size_t x_row_bytes = sizeof(float) * kK;
  if (IsBlock(type)) {
    for (int i = 0; i < kM; ++i) {
      ScalarKernels().quantize_row_q8_0(x.data() + i * kK, kK, xq.data() + i * kK / 32);
      DequantizeRow(GgmlType::kQ8_0, reinterpret_cast<const uint8_t*>(xq.data() + i * kK / 32), kK,
                    x_used.data() + i * kK);
    }
    x_bytes = reinterpret_cast<const uint8_t*>(xq.data());
    x_row_bytes = sizeof(BlockQ8_0) * (kK / 32);
  }
  std::vector<float> y_fast(kM * kN), y_ref(kM * kN);
  TileScratch scratch;
  MatmulTile tile{.w = w.data(),
                  .w_row_bytes = w_row_bytes,
                  .x = x_bytes,
                  .x_row_bytes = x_row_bytes,
                  .m = kM,
                  .k = kK,
                  .n_begin = 0,
                  .n_end = kN,
                  .y = y_fast.data(),
                  .ldy = kN,
                  .scratch = &scratch};
  MatmulFor(kernels, type)(tile);
  tile.y = y_ref.data();
  MatmulFor(ScalarKernels(), type)(tile);

  std::vector<float> w_row(kK);
  const double terms = IsBlock(type) ? 3.0 * (kK / 32) + 16 : kK + 16;
  KernelCheck check{.what = std::string("matmul ") + GgmlTypeName(type), .ok = true};
  for (int j = 0; j < kN; ++j) {
    DequantizeRow(type, w.data() + w_row_bytes * j, kK, w_row.data());
    for (int i = 0; i < kM; ++i) {
      double abs_dot = 0;
      for (int k = 0; k < kK; ++k) abs_dot += std::fabs(double{w_row[k]} * x_used[i * kK + k]);
      const double tolerance = terms * std::numeric_limits<float>::epsilon() * abs_dot +
                               std::numeric_limits<float>::denorm_min();
      const double error = std::fabs(double{y_fast[i * kN + j]} - y_ref[i * kN + j]);
      if (!(error <= tolerance)) check.ok = false;  // NaN fails too
      check.max_error = std::max(check.max_error, error);
      check.max_ratio = std::max(check.max_ratio, error / tolerance);
    }
  }
  return check;
}

// The activation quantizer: decoded values may differ from the scalar twin's by one step of the
// block's scale (rounding of the reciprocal), never more.
KernelCheck CheckQuantize(const KernelTable& kernels) {
  constexpr int kK = 256;
  const std::vector<float> x = RandomFloats(kK, 5);
  std::vector<BlockQ8_0> fast(kK / 32), ref(kK / 32);
  kernels.quantize_row_q8_0(x.data(), kK, fast.data());
  ScalarKernels().quantize_row_q8_0(x.data(), kK, ref.data());
  std::vector<float> fast_x(kK), ref_x(kK);
  DequantizeRow(GgmlType::kQ8_0, reinterpret_cast<const uint8_t*>(fast.data()), kK, fast_x.data());
  DequantizeRow(GgmlType::kQ8_0, reinterpret_cast<const uint8_t*>(ref.data()), kK, ref_x.data());
  KernelCheck check{.what = "quantize Q8_0", .ok = true};
  for (int i = 0; i < kK; ++i) {
    float amax = 0;
    for (int j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double tolerance = 1.01 * amax / 127.0 + std::numeric_limits<float>::denorm_min();
    const double error = std::fabs(double{fast_x[i]} - ref_x[i]);
    if (!(error <= tolerance)) check.ok = false;
    check.max_error = std::max(check.max_error, error);
    check.max_ratio = std::max(check.max_ratio, error / tolerance);
  }
  return check;
}

// Kernels whose contract is bit equality with the scalar twin: any differing bit fails.
KernelCheck BitwiseCheck(std::string what, const std::vector<float>& fast,
                         const std::vector<float>& ref) {
  KernelCheck check{.what = std::move(what), .ok = fast.size() == ref.size()};
  for (size_t i = 0; i < fast.size() && i < ref.size(); ++i) {
    if (std::memcmp(&fast[i], &ref[i], sizeof(float)) != 0) check.ok = false;
    check.max_error = std::max(check.max_error, std::fabs(double{fast[i]} - ref[i]));
  }
  check.max_ratio = check.ok ? 0.0 : 1e9;
  return check;
}

// One 64-dim query head over 37 keys of a paged F32 pool (blocks of 16, in reverse order).
KernelCheck CheckAttention(const KernelTable& kernels) {
  constexpr int kHeadDim = 64, kKeys = 37, kBlock = 16, kBlocks = 3;
  const std::vector<float> k = RandomFloats(kBlocks * kBlock * kHeadDim, 21);
  const std::vector<float> v = RandomFloats(kBlocks * kBlock * kHeadDim, 22);
  const std::vector<float> q = RandomFloats(kHeadDim, 23);
  const int32_t block_table[kBlocks] = {2, 0, 1};
  auto run = [&](const KernelTable& table) {
    std::vector<float> scores(48), out(kHeadDim);
    table.attend_head(AttendJob{.q = q.data(),
                                .k = reinterpret_cast<const uint8_t*>(k.data()),
                                .v = reinterpret_cast<const uint8_t*>(v.data()),
                                .slot_bytes = sizeof(float) * kHeadDim,
                                .type = KvType::kF32,
                                .block_table = block_table,
                                .block_size = kBlock,
                                .n_keys = kKeys,
                                .head_dim = kHeadDim,
                                .scale = 0.125f,
                                .scores = scores.data(),
                                .out = out.data()});
    return out;
  };
  return BitwiseCheck("attention", run(kernels), run(ScalarKernels()));
}

// GELU's f16 table lookup over [-12, 12] (both cut-offs included).
KernelCheck CheckGelu(const KernelTable& kernels) {
  std::vector<float> x(2401);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -12.0f + 0.01f * static_cast<float>(i);
  std::vector<float> fast = x, ref = x;
  kernels.gelu_f16_table(GeluF16Table(), fast.data(), static_cast<int>(fast.size()));
  ScalarKernels().gelu_f16_table(GeluF16Table(), ref.data(), static_cast<int>(ref.size()));
  return BitwiseCheck("gelu", fast, ref);
}

// SwiGLU (its exp included) over [-100, 100].
KernelCheck CheckSwiGlu(const KernelTable& kernels) {
  std::vector<float> gate(2001), up(2001);
  for (size_t i = 0; i < gate.size(); ++i) {
    gate[i] = -100.0f + 0.1f * static_cast<float>(i);
    up[i] = 1.0f - 0.001f * static_cast<float>(i);
  }
  std::vector<float> fast = gate, ref = gate;
  kernels.swiglu(fast.data(), up.data(), static_cast<int>(fast.size()));
  ScalarKernels().swiglu(ref.data(), up.data(), static_cast<int>(ref.size()));
  return BitwiseCheck("swiglu", fast, ref);
}

}  // namespace

Measurement MeasureReadBandwidth(const KernelTable& kernels, ThreadPool& pool, uint64_t bytes,
                                 int repeats) {
  const size_t n = bytes / sizeof(float);
  // On huge pages, as the packed weights are (util/large_memory.h): with 4 KiB pages this probe
  // read 45 GB/s where the K-quant decode then streamed 50-60.
  std::unique_ptr<float[], void (*)(void*)> buffer(
      static_cast<float*>(AllocateLarge(n * sizeof(float))), FreeLarge);
  if (buffer == nullptr) throw std::bad_alloc();
  // Each thread touches its own part first, so pages land near the thread that reads them.
  // Ones keep the dot product away from denormals and NaNs.
  pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t begin, int64_t end) {
    std::fill(buffer.get() + begin, buffer.get() + end, 1.0f);
  });
  std::vector<double> sums(pool.size());
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    pool.Run([&](int thread) {
      const size_t begin = n * thread / pool.size();
      const size_t end = n * (thread + 1) / pool.size();
      sums[thread] += ReadFloats(kernels, buffer.get() + begin, end - begin);
    });
    rates.push_back(static_cast<double>(n * sizeof(float)) / SecondsSince(start));
  }
  double total = 0;
  for (double s : sums) total += s;
  // Keeps the sums observable: every element is 1, so the total is n per repeat, never -1.
  if (total == -1) rates.push_back(0);
  return Summarize(rates);
}

Measurement MeasureMatmulFlops(const KernelTable& kernels, GgmlType type, int m, int n_out,
                               int n_in, ThreadPool& pool, int repeats) {
  const std::vector<uint8_t> w_bytes = RandomWeights(type, n_out, n_in, 3);
  WeightMatrix w{.type = type,
                 .data = w_bytes.data(),
                 .n_out = n_out,
                 .n_in = n_in,
                 .row_bytes = RowBytes(type, n_in)};
  // Packed as the backend packs a model's matrices, so the rate is the kernel a model runs.
  std::unique_ptr<uint8_t, void (*)(void*)> packed(nullptr, FreeLarge);
  if (HasPackedLayout(type) && PackedMatmulFor(kernels, type) != nullptr) {
    packed.reset(static_cast<uint8_t*>(AllocateLarge(PackedMatrixBytes(type, n_out, n_in))));
    if (packed != nullptr) {
      PackGroups(type, w_bytes.data(), w.row_bytes, n_out, n_in, 0,
                 (n_out + kPackRows - 1) / kPackRows, packed.get());
      w.packed = packed.get();
    }
  }
  const std::vector<float> x = RandomFloats(static_cast<size_t>(m) * n_in, 1);
  std::vector<float> y(static_cast<size_t>(m) * n_out);
  MatmulScratch scratch(pool.size());
  Matmul(kernels, w, x.data(), m, y.data(), scratch, pool);  // warm-up: caches, scratch
  const double flops = 2.0 * m * n_out * n_in;
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    Matmul(kernels, w, x.data(), m, y.data(), scratch, pool);
    rates.push_back(flops / SecondsSince(start));
  }
  return Summarize(rates);
}

std::vector<KernelCheck> CheckKernelsAgainstScalar(const KernelTable& kernels) {
  std::vector<KernelCheck> checks;
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    if (MatmulFor(kernels, type) == nullptr || MatmulFor(ScalarKernels(), type) == nullptr) {
      checks.push_back({.what = std::string("matmul ") + GgmlTypeName(type), .ok = false});
      continue;
    }
    checks.push_back(CheckMatmul(kernels, type));
  }
  checks.push_back(CheckQuantize(kernels));
  checks.push_back(CheckAttention(kernels));
  checks.push_back(CheckGelu(kernels));
  checks.push_back(CheckSwiGlu(kernels));
  return checks;
}

}  // namespace kvserve
