// VulkanBackend's checks and measurements of itself (`kvserve doctor --backend vulkan`): every
// matmul shader against the exact sum of its dequantized weights times x as it reads x, the
// quantize shaders against the CPU quantizer's bytes, and the matmul rate on the device. The read
// bandwidth is the CPU backend's (host memory).
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ggml_blocks.h"
#include "kernels/quantize.h"
#include "kernels/vulkan/vulkan_backend.h"
#include "kernels/vulkan/vulkan_workspace.h"

namespace kvserve {

namespace {

constexpr GgmlType kShaderTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,   GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kMXFP4,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,   GgmlType::kQ6_K};

// A random matrix in `type` (bytes) and its dequantized values.
struct RandomMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  WeightMatrix matrix;
};

RandomMatrix MakeRandomMatrix(GgmlType type, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> source(static_cast<size_t>(n_out) * n_in);
  for (float& v : source) v = normal(rng);
  RandomMatrix m;
  const size_t row_bytes = RowBytes(type, n_in);
  m.bytes.resize(row_bytes * n_out);
  m.values.resize(source.size());
  for (int o = 0; o < n_out; ++o) {
    QuantizeRow(type, &source[static_cast<size_t>(o) * n_in], n_in, &m.bytes[o * row_bytes]);
    DequantizeRow(type, &m.bytes[o * row_bytes], n_in, &m.values[static_cast<size_t>(o) * n_in]);
  }
  m.matrix = {
      .type = type, .data = m.bytes.data(), .n_out = n_out, .n_in = n_in, .row_bytes = row_bytes};
  return m;
}

// For Q8_1 activations (Q4_1 and Q5_1 weights) the kernels multiply a weight block's offset m by
// x's stored block sum s = f16(d_x Σ q_x), where the dequantized values give m d_x Σ q_x: the
// difference over one row's blocks.  w_row, x_row: one row's blocks; n_in: its elements
double OffsetSumCorrection(GgmlType type, const uint8_t* w_row, const uint8_t* x_row, int n_in) {
  double correction = 0;
  for (int b = 0; b < n_in / 32; ++b) {
    Unpacked32 u;
    Unpack32For(type)(w_row + b * TraitsOf(type).block_bytes, u);
    const auto xb = LoadBlock<BlockQ8_1>(x_row + b * sizeof(BlockQ8_1));
    int sum = 0;
    for (int e = 0; e < 32; ++e) sum += xb.quants[e];
    correction += static_cast<double>(u.m) *
                  (Fp16ToFloat(xb.s) - static_cast<double>(Fp16ToFloat(xb.d)) * sum);
  }
  return correction;
}

// Rows to round to 8 bits: random normals, with a block of zeros, a block whose codes are exact
// ties (amax 127: d = 1, x * id = x; Q8_K's first block too, unless n > 300), an outlier, negative
// maxima, and -0.
std::vector<float> QuantizeCheckRows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (int j = 0; j < 32 && j < n; ++j) x[j] = 0.0f;
  for (int j = 32; j < 64 && j < n; ++j)
    x[j] = j == 32 ? 127.0f : static_cast<float>(j - 48) + 0.5f;
  if (n > 300) x[100] = -4000.0f;
  if (n > 70) x[70] = -0.0f;
  return x;
}

}  // namespace

// x rounded to Q8_0, Q8_1 and Q8_K by quantize_rows.comp against the CPU quantizer: max_error is
// the count of bytes that differ (none passes). Shapes with an odd count of Q8_0 blocks too.
std::vector<KernelCheck> VulkanBackend::CheckQuantizeShaders() const {
  std::vector<KernelCheck> checks;
  auto ws = NewWorkspace({.n_threads = 1});
  VulkanWorkspace& vk = Vk(*ws);
  for (GgmlType x_type : {GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ8_K}) {
    KernelCheck check{.what = std::string("vulkan quantize ") + GgmlTypeName(x_type), .ok = true};
    for (const int64_t n : {int64_t{64} * 256, int64_t{256}, int64_t{96}}) {
      if (n % TraitsOf(x_type).block_elements != 0) continue;
      const std::vector<float> x = QuantizeCheckRows(n, static_cast<uint32_t>(n));
      const size_t bytes = RowBytes(x_type, n);
      std::vector<uint8_t> expected(bytes);
      QuantizeInput(x_type, x.data(), n, expected.data());
      vk.BeginOperation(VulkanBackendParts::device->completed());
      uint8_t* out = vk.Transient(bytes + 4);
      const bool ran = QuantizeOnDevice(x_type, x.data(), n, out, vk);
      std::vector<uint8_t> got(bytes);
      memory->CopyToHost(out, bytes, got.data());  // waits for the dispatch
      double differ = 0;
      for (size_t i = 0; i < bytes; ++i) differ += got[i] != expected[i];
      check.max_error = std::max(check.max_error, ran ? differ : static_cast<double>(bytes));
    }
    check.ok = check.max_error == 0;
    check.max_ratio = check.ok ? 0.0 : 2.0;
    checks.push_back(check);
  }
  return checks;
}

// 3 rows through a 40 x 512 matrix of each type; the tolerance is 4x the worst case of float
// summation over n_in + 96 steps (as tests/vulkan_backend_test.cc bounds it).
std::vector<KernelCheck> VulkanBackend::CheckKernels() const {
  constexpr int kOut = 40, kIn = 512, kRows = 3;
  std::vector<KernelCheck> checks;
  auto ws = NewWorkspace({.n_threads = 1});
  std::vector<float> x(kRows * kIn);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (GgmlType type : kShaderTypes) {
    RandomMatrix m = MakeRandomMatrix(type, kOut, kIn, 11);
    std::shared_ptr<uint8_t> storage;
    WeightMatrix* list[] = {&m.matrix};
    CopyWeights(list, {}, storage);
    std::vector<float> y(kRows * kOut);
    Matmul(m.matrix, x.data(), kRows, y.data(), *ws);
    KernelCheck check{.what = std::string("vulkan matmul ") + GgmlTypeName(type), .ok = true};
    // x as the shader reads it: rounded to 8 bits for the quantized types.
    std::vector<float> read = x;
    const std::optional<GgmlType> x_type = QuantizedInputType(type);
    const size_t x_row_bytes = x_type.has_value() ? RowBytes(*x_type, kIn) : 0;
    std::vector<uint8_t> x_bytes(x_row_bytes * kRows);
    for (int r = 0; r < kRows && x_type.has_value(); ++r) {
      QuantizeInput(*x_type, &x[r * kIn], kIn, &x_bytes[r * x_row_bytes]);
      DequantizeRow(*x_type, &x_bytes[r * x_row_bytes], kIn, &read[r * kIn]);
    }
    for (int r = 0; r < kRows; ++r) {
      for (int o = 0; o < kOut; ++o) {
        double exact = 0, magnitude = 0;
        if (x_type == GgmlType::kQ8_1) {
          exact = OffsetSumCorrection(type, &m.bytes[o * m.matrix.row_bytes],
                                      &x_bytes[r * x_row_bytes], kIn);
        }
        for (int i = 0; i < kIn; ++i) {
          const double product = static_cast<double>(m.values[o * kIn + i]) * read[r * kIn + i];
          exact += product;
          magnitude += std::fabs(product);
        }
        const double tolerance = 4.0 * (kIn + 96) * std::ldexp(1.0, -24) * magnitude + 1e-30;
        const double error = std::fabs(y[r * kOut + o] - exact);
        check.max_error = std::max(check.max_error, error);
        check.max_ratio = std::max(check.max_ratio, error / tolerance);
      }
    }
    check.ok = check.max_ratio <= 1.0;
    checks.push_back(check);
  }
  for (const KernelCheck& check : CheckQuantizeShaders()) checks.push_back(check);
  return checks;
}

// FLOP/s of an m x n_in by n_in x n_out product on the device: the best and mean of `repeats`.
Measurement VulkanBackend::MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in,
                                              int repeats, Workspace& ws) const {
  RandomMatrix matrix = MakeRandomMatrix(type, n_out, n_in, 3);
  std::shared_ptr<uint8_t> storage;
  WeightMatrix* list[] = {&matrix.matrix};
  CopyWeights(list, {}, storage);
  float* x = ws.Floats(0, static_cast<size_t>(m) * n_in);
  float* y = ws.Floats(1, static_cast<size_t>(m) * n_out);
  std::fill(x, x + static_cast<size_t>(m) * n_in, 0.5f);
  Measurement out{.repeats = std::max(1, repeats)};
  const double flops = 2.0 * m * n_out * n_in;
  for (int rep = 0; rep < out.repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    Matmul(matrix.matrix, x, m, y, ws);
    VulkanBackendParts::device->Flush();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.best = std::max(out.best, flops / seconds);
    out.mean += flops / seconds / out.repeats;
  }
  return out;
}

}  // namespace kvserve
