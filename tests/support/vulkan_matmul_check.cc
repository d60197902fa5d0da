#include "support/vulkan_matmul_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "io/gguf_reader.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/kernels.h"
#include "kernels/ggml_blocks.h"
#include "kernels/quantize.h"
#include "support/paths.h"
#include "support/vulkan_backends.h"
#include "util/half.h"

namespace kvserve::testing {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& v : out) v = normal(rng);
  return out;
}

TestMatrix MakeMatrix(GgmlType type, int n_out, int n_in, uint32_t seed) {
  TestMatrix m;
  const std::vector<float> source = RandomFloats(static_cast<size_t>(n_out) * n_in, seed);
  const size_t row_bytes = RowBytes(type, n_in);
  m.bytes.resize(row_bytes * n_out);
  m.values.resize(source.size());
  for (int o = 0; o < n_out; ++o) {
    QuantizeRow(type, source.data() + static_cast<size_t>(o) * n_in, n_in,
                m.bytes.data() + o * row_bytes);
    DequantizeRow(type, m.bytes.data() + o * row_bytes, n_in,
                  m.values.data() + static_cast<size_t>(o) * n_in);
  }
  m.matrix = {
      .type = type, .data = m.bytes.data(), .n_out = n_out, .n_in = n_in, .row_bytes = row_bytes};
  return m;
}

const GgufFile& AnyFile() {
  static const GgufFile file = std::move(*GgufFile::Open(ModelPath("stories260K.gguf")));
  return file;
}

WeightMatrix Prepared(const Backend& backend, TestMatrix& m) {
  WeightMatrix prepared = m.matrix;
  WeightMatrix* list[] = {&prepared};
  backend.PrepareWeights(list, {}, AnyFile(), m.storage);
  return prepared;
}

std::vector<float> AsRead(GgmlType type, const float* x, int n_in) {
  std::vector<float> out(x, x + n_in);
  const GgmlType x_type = ActivationTypeFor(type);
  if (x_type == GgmlType::kF32) return out;
  std::vector<uint8_t> bytes(RowBytes(x_type, n_in));
  // The CPU backend's activation quantizers (kernels/cpu/matmul.cc), the ones both backends use.
  static const CpuBackend cpu;
  if (x_type == GgmlType::kQ8_K) {
    cpu.kernels().quantize_row_q8_k(x, n_in, reinterpret_cast<BlockQ8_K*>(bytes.data()));
  } else if (x_type == GgmlType::kQ8_0) {
    cpu.kernels().quantize_row_q8_0(x, n_in, reinterpret_cast<BlockQ8_0*>(bytes.data()));
  } else {
    QuantizeRow(x_type, x, n_in, bytes.data());
  }
  DequantizeRow(x_type, bytes.data(), n_in, out.data());
  return out;
}

namespace {

// How far the CPU's rounding of x may move one output where the Vulkan shader keeps x f32: f16 or
// bf16 of x for those weights; nothing for f32 and for the quantized types (the same Q8 rounding).
double CpuInputRounding(GgmlType type, const float* w, const float* x, int n_in) {
  double sum_wx = 0;
  for (int i = 0; i < n_in; ++i) sum_wx += std::fabs(w[i] * x[i]);
  if (type == GgmlType::kF16) return sum_wx * std::ldexp(1.0, -11);
  if (type == GgmlType::kBF16) return sum_wx * std::ldexp(1.0, -8);
  return 0;
}

struct ExactDot {
  double sum = 0;
  double magnitude = 0;  // Σ |terms|
};

// Output o of `m` times x (its raw row) as the kernels compute it, in double: the dequantized
// weights times x as read; for Q8_1 activations (Q4_1, Q5_1) the weight's offset m multiplies x's
// stored block sum s (f16(d_x Σ q_x), not Σ of x as read), as the format says.
ExactDot Exact(GgmlType type, const TestMatrix& m, int o, const float* x) {
  const int n_in = static_cast<int>(m.matrix.n_in);
  ExactDot dot;
  if (ActivationTypeFor(type) != GgmlType::kQ8_1) {
    const std::vector<float> read = AsRead(type, x, n_in);
    const float* w = m.values.data() + static_cast<size_t>(o) * n_in;
    for (int i = 0; i < n_in; ++i) {
      const double term = static_cast<double>(w[i]) * read[i];
      dot.sum += term;
      dot.magnitude += std::fabs(term);
    }
    return dot;
  }
  std::vector<uint8_t> xq(RowBytes(GgmlType::kQ8_1, n_in));
  QuantizeRow(GgmlType::kQ8_1, x, n_in, xq.data());
  const uint8_t* row = m.bytes.data() + static_cast<size_t>(o) * m.matrix.row_bytes;
  const size_t block_bytes = TraitsOf(type).block_bytes;
  for (int b = 0; b < n_in / 32; ++b) {
    Unpacked32 u;
    Unpack32For(type)(row + b * block_bytes, u);
    const auto xb = LoadBlock<BlockQ8_1>(xq.data() + b * sizeof(BlockQ8_1));
    const double dx = Fp16ToFloat(xb.d);
    for (int e = 0; e < 32; ++e) {
      const double term = static_cast<double>(u.d) * u.q[e] * (dx * xb.quants[e]);
      dot.sum += term;
      dot.magnitude += std::fabs(term);
    }
    const double offset = static_cast<double>(u.m) * Fp16ToFloat(xb.s);
    dot.sum += offset;
    dot.magnitude += std::fabs(offset);
  }
  return dot;
}

}  // namespace

MatmulDifference CheckMatmul(GgmlType type, const Shape& s, uint32_t seed) {
  SCOPED_TRACE(std::string(GgmlTypeName(type)) + " " + std::to_string(s.n_out) + "x" +
               std::to_string(s.n_in) + ", " + std::to_string(s.n_rows) + " rows");
  MatmulDifference difference;
  const VulkanAndCpu& b = GetBackends();
  TestMatrix m = MakeMatrix(type, s.n_out, s.n_in, seed);
  TestMatrix cpu_m = MakeMatrix(type, s.n_out, s.n_in, seed);
  const WeightMatrix on_vulkan = Prepared(*b.vulkan, m);
  EXPECT_NE(on_vulkan.packed, nullptr) << "the weights were not copied to the device";
  if (on_vulkan.packed == nullptr) return difference;
  const WeightMatrix on_cpu = Prepared(*b.cpu, cpu_m);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(s.n_rows) * s.n_in, seed + 1);
  auto vulkan_ws = b.vulkan->NewWorkspace({});
  auto cpu_ws = b.cpu->NewWorkspace({.n_threads = 1});
  float* x_device = vulkan_ws->Floats(0, x.size());  // device memory: bound in place
  WriteDevice(*b.vulkan, x, x_device);
  float* y_device = vulkan_ws->Floats(1, static_cast<size_t>(s.n_rows) * s.n_out);
  b.vulkan->Matmul(on_vulkan, x_device, s.n_rows, y_device, *vulkan_ws);
  const std::vector<float> y = ReadDevice(*b.vulkan, y_device, s.n_rows * s.n_out);
  std::vector<float> y_cpu(static_cast<size_t>(s.n_rows) * s.n_out);
  b.cpu->Matmul(on_cpu, x.data(), s.n_rows, y_cpu.data(), *cpu_ws);
  int bad = 0;
  for (int r = 0; r < s.n_rows; ++r) {
    const float* x_row = x.data() + static_cast<size_t>(r) * s.n_in;
    const std::vector<float> read = AsRead(type, x_row, s.n_in);
    const float* xr = read.data();
    for (int o = 0; o < s.n_out && bad < 5; ++o) {
      const float* w = m.values.data() + static_cast<size_t>(o) * s.n_in;
      const ExactDot dot = Exact(type, m, o, x_row);
      const double exact = dot.sum;
      const double magnitude = dot.magnitude;
      // Float summation of n_in products in at most n_in / 32 + 64 + 32 steps, with room: the
      // K-quants' scale-times-sum and min-times-sum add a few roundings of their own.
      const double summation = 4.0 * (s.n_in + 96) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      const size_t at = static_cast<size_t>(r) * s.n_out + o;
      const double from_cpu = std::fabs(static_cast<double>(y[at]) - y_cpu[at]);
      difference.max_abs = std::max(difference.max_abs, from_cpu);
      difference.max_relative = std::max(difference.max_relative, from_cpu / (magnitude + 1e-30));
      const bool near_exact = std::fabs(y[at] - exact) <= summation;
      const bool near_cpu = from_cpu <= 2 * summation + CpuInputRounding(type, w, xr, s.n_in);
      EXPECT_TRUE(near_exact) << "row " << r << " output " << o << ": " << y[at] << " vs exact "
                              << exact << " (bound " << summation << ")";
      EXPECT_TRUE(near_cpu) << "row " << r << " output " << o << ": " << y[at] << " vs cpu "
                            << y_cpu[at];
      bad += !near_exact || !near_cpu;
    }
  }
  return difference;
}

void ExpectBatchOf16EqualsAlone(const Backend& vulkan, GgmlType type) {
  SCOPED_TRACE(GgmlTypeName(type));
  TestMatrix m = MakeMatrix(type, 19, 512, 5);
  const WeightMatrix w = Prepared(vulkan, m);
  ASSERT_NE(w.packed, nullptr);
  const std::vector<float> x = RandomFloats(16 * 512, 6);
  auto ws = vulkan.NewWorkspace({});
  std::vector<float> batch(16 * 19);
  vulkan.Matmul(w, x.data(), 16, batch.data(), *ws);
  for (int r : {0, 7, 15}) {
    std::vector<float> alone(19);
    vulkan.Matmul(w, x.data() + r * 512, 1, alone.data(), *ws);
    EXPECT_EQ(0, std::memcmp(alone.data(), batch.data() + r * 19, sizeof(float) * 19))
        << "row " << r;
  }
}

}  // namespace kvserve::testing
