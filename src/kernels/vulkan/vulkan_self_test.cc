// VulkanBackend's checks and measurements of itself (`kvserve doctor --backend vulkan`): every
// matmul shader against the exact sum of its dequantized weights times x as it reads x, and the
// matmul rate on the device. The read bandwidth is the CPU backend's (host memory).
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/vulkan/vulkan_backend.h"

namespace kvserve {

namespace {

constexpr GgmlType kShaderTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                     GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                     GgmlType::kQ5_K, GgmlType::kQ6_K};

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

}  // namespace

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
    if (const std::optional<GgmlType> x_type = QuantizedInputType(type); x_type.has_value()) {
      std::vector<uint8_t> bytes(RowBytes(*x_type, kIn));
      for (int r = 0; r < kRows; ++r) {
        QuantizeInput(*x_type, &x[r * kIn], kIn, bytes.data());
        DequantizeRow(*x_type, bytes.data(), kIn, &read[r * kIn]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int o = 0; o < kOut; ++o) {
        double exact = 0, magnitude = 0;
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
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.best = std::max(out.best, flops / seconds);
    out.mean += flops / seconds / out.repeats;
  }
  return out;
}

}  // namespace kvserve
