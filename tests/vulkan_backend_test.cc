// vulkan_backend_test: the Vulkan backend's shaders (kernels/vulkan/) against exact sums and the
// CPU backend, on random inputs over odd shapes, on whatever Vulkan device is device 0 (lavapipe
// in CI: scripts/install-deps.sh installs it).
// - Matmul for every weight type with a shader is within a float-summation bound of the exact sum
//   of the dequantized weights times x as it reads x (rounded to Q8_0 or Q8_K for the quantized
//   types, as the CPU backend rounds it), and within twice that of the CPU backend (plus the CPU's
//   f16/bf16 rounding of x for those weights); outputs past 32768 (a second row of workgroups)
//   included.
// - A row's outputs are the same bits alone and in a batch of 16 (fixed reduction order).
// - RMS norm, layer norm, add, bias, scale, SwiGLU (and gpt-oss's), soft-cap and RoPE (both
//   pairings, divisors, YaRN) agree with the CPU; GELU, GeGLU (the CPU's f16 table, NaN, -0, the
//   +-10 clamps, subnormals), ReLU and bias give its bits.
// - Arguments in plain host memory are staged and copied back: the same bits as in device memory.
// - Weights are copied to device memory at load (the matrix's `packed`, each vector's `prepared`).
// A build without the backend skips; a build with it fails without a device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/kernels.h"
#include "kernels/quantize.h"
#include "support/cli.h"
#include "support/paths.h"
#include "support/vulkan_backends.h"

namespace kvserve {
namespace {

using testing::GetBackends;

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& v : out) v = normal(rng);
  return out;
}

// A matrix quantized from random values, with its host bytes and its exact (dequantized) values.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [n_out, n_in] as stored
  WeightMatrix matrix;
  std::shared_ptr<uint8_t> storage;
};

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
  static const GgufFile file = std::move(*GgufFile::Open(testing::ModelPath("stories260K.gguf")));
  return file;
}

// Prepares `m` on `backend` (the Vulkan copy, or the CPU's packing) into a copy of the matrix.
WeightMatrix Prepared(const Backend& backend, TestMatrix& m) {
  WeightMatrix prepared = m.matrix;
  WeightMatrix* list[] = {&prepared};
  backend.PrepareWeights(list, {}, AnyFile(), m.storage);
  return prepared;
}

struct Shape {
  int n_out;
  int n_in;
  int n_rows;
};

// x as a matmul of `type` reads it: rounded to 8 bits for the quantized types (Q8_0 for Q8_0 and
// Q4_0, Q8_K for the K-quants), as both backends round it; f32 otherwise.
std::vector<float> AsRead(GgmlType type, const float* x, int n_in) {
  std::vector<float> out(x, x + n_in);
  const bool k_quant =
      type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
  const bool block32 = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;
  if (!k_quant && !block32) return out;
  const GgmlType x_type = k_quant ? GgmlType::kQ8_K : GgmlType::kQ8_0;
  std::vector<uint8_t> bytes(RowBytes(x_type, n_in));
  // The CPU backend's activation quantizer, the one both backends use.
  static const CpuBackend cpu;
  if (k_quant) {
    cpu.kernels().quantize_row_q8_k(x, n_in, reinterpret_cast<BlockQ8_K*>(bytes.data()));
  } else {
    cpu.kernels().quantize_row_q8_0(x, n_in, reinterpret_cast<BlockQ8_0*>(bytes.data()));
  }
  DequantizeRow(x_type, bytes.data(), n_in, out.data());
  return out;
}

// How far the CPU's rounding of x may move one output where the Vulkan shader keeps x f32: f16 or
// bf16 of x for those weights; nothing for f32 and for the quantized types (the same Q8 rounding).
double CpuInputRounding(GgmlType type, const float* w, const float* x, int n_in) {
  double sum_wx = 0;
  for (int i = 0; i < n_in; ++i) sum_wx += std::fabs(w[i] * x[i]);
  if (type == GgmlType::kF16) return sum_wx * std::ldexp(1.0, -11);
  if (type == GgmlType::kBF16) return sum_wx * std::ldexp(1.0, -8);
  return 0;
}

void CheckMatmul(GgmlType type, const Shape& s, uint32_t seed) {
  SCOPED_TRACE(std::string(GgmlTypeName(type)) + " " + std::to_string(s.n_out) + "x" +
               std::to_string(s.n_in) + ", " + std::to_string(s.n_rows) + " rows");
  const testing::VulkanAndCpu& b = GetBackends();
  TestMatrix m = MakeMatrix(type, s.n_out, s.n_in, seed);
  TestMatrix cpu_m = MakeMatrix(type, s.n_out, s.n_in, seed);
  const WeightMatrix on_vulkan = Prepared(*b.vulkan, m);
  ASSERT_NE(on_vulkan.packed, nullptr) << "the weights were not copied to the device";
  const WeightMatrix on_cpu = Prepared(*b.cpu, cpu_m);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(s.n_rows) * s.n_in, seed + 1);
  auto vulkan_ws = b.vulkan->NewWorkspace({});
  auto cpu_ws = b.cpu->NewWorkspace({.n_threads = 1});
  float* x_device = vulkan_ws->Floats(0, x.size());  // device memory: bound in place
  std::copy(x.begin(), x.end(), x_device);
  float* y = vulkan_ws->Floats(1, static_cast<size_t>(s.n_rows) * s.n_out);
  b.vulkan->Matmul(on_vulkan, x_device, s.n_rows, y, *vulkan_ws);
  std::vector<float> y_cpu(static_cast<size_t>(s.n_rows) * s.n_out);
  b.cpu->Matmul(on_cpu, x.data(), s.n_rows, y_cpu.data(), *cpu_ws);
  int bad = 0;
  for (int r = 0; r < s.n_rows; ++r) {
    const std::vector<float> read =
        AsRead(type, x.data() + static_cast<size_t>(r) * s.n_in, s.n_in);
    const float* xr = read.data();
    for (int o = 0; o < s.n_out && bad < 5; ++o) {
      const float* w = m.values.data() + static_cast<size_t>(o) * s.n_in;
      double exact = 0;
      double magnitude = 0;
      for (int i = 0; i < s.n_in; ++i) {
        exact += static_cast<double>(w[i]) * xr[i];
        magnitude += std::fabs(static_cast<double>(w[i]) * xr[i]);
      }
      // Float summation of n_in products in at most n_in / 32 + 64 + 32 steps, with room: the
      // K-quants' scale-times-sum and min-times-sum add a few roundings of their own.
      const double summation = 4.0 * (s.n_in + 96) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      const size_t at = static_cast<size_t>(r) * s.n_out + o;
      const bool near_exact = std::fabs(y[at] - exact) <= summation;
      const bool near_cpu =
          std::fabs(y[at] - y_cpu[at]) <= 2 * summation + CpuInputRounding(type, w, xr, s.n_in);
      EXPECT_TRUE(near_exact) << "row " << r << " output " << o << ": " << y[at] << " vs exact "
                              << exact << " (bound " << summation << ")";
      EXPECT_TRUE(near_cpu) << "row " << r << " output " << o << ": " << y[at] << " vs cpu "
                            << y_cpu[at];
      bad += !near_exact || !near_cpu;
    }
  }
}

TEST(VulkanBackend, EveryMatmulTypeAgreesWithExactSumsAndTheCpuOnOddShapes) {
  REQUIRE_VULKAN();
  const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                             GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  uint32_t seed = 1;
  for (GgmlType type : kTypes) {
    const int block = static_cast<int>(TraitsOf(type).block_elements);
    const bool plain = block == 1;
    // n_in: one block, several (with a partial 32-unit for the plain types), and more units than
    // the 64 threads of a workgroup.
    for (const Shape& s : {Shape{37, plain ? 45 : block, 1}, Shape{5, plain ? 333 : 2 * block, 3},
                           Shape{9, plain ? 2100 : 9 * block, 2}}) {
      CheckMatmul(type, s, seed++);
    }
  }
}

TEST(VulkanBackend, OutputsPastTheFirstRowOfWorkgroupsAreComputed) {
  REQUIRE_VULKAN();
  CheckMatmul(GgmlType::kF16, Shape{32768 + 300, 32, 2}, 77);
}

// 32800 x 1040 f32 is 136 MB, past lavapipe's 128 MiB per binding (maxStorageBufferRange): the
// matmul runs on the CPU backend there, and on the device where one binding may span it; either
// way the outputs are right.
TEST(VulkanBackend, AMatrixPastOneBindingsRangeStillMultiplies) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  constexpr int kOut = 32800, kIn = 1040;
  std::vector<float> values(static_cast<size_t>(kOut) * kIn);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
  WeightMatrix w{.type = GgmlType::kF32,
                 .data = reinterpret_cast<const uint8_t*>(values.data()),
                 .n_out = kOut,
                 .n_in = kIn,
                 .row_bytes = kIn * sizeof(float)};
  WeightMatrix on_vulkan = w;
  WeightMatrix* list[] = {&on_vulkan};
  std::shared_ptr<uint8_t> storage;
  b.vulkan->PrepareWeights(list, {}, AnyFile(), storage);
  const std::vector<float> x = RandomFloats(kIn, 41);
  std::vector<float> y(kOut), y_cpu(kOut);
  auto ws = b.vulkan->NewWorkspace({});
  auto cpu_ws = b.cpu->NewWorkspace({.n_threads = 1});
  b.vulkan->Matmul(on_vulkan, x.data(), 1, y.data(), *ws);
  b.cpu->Matmul(w, x.data(), 1, y_cpu.data(), *cpu_ws);
  for (int o = 0; o < kOut; o += 997) {
    double magnitude = 0;
    for (int i = 0; i < kIn; ++i) magnitude += std::fabs(values[size_t(o) * kIn + i] * x[i]);
    EXPECT_NEAR(y[o], y_cpu[o], 8.0 * (kIn + 96) * std::ldexp(1.0, -24) * magnitude) << o;
  }
}

TEST(VulkanBackend, AMatmulRowIsTheSameBitsAloneAndInABatchOf16) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kF16, GgmlType::kQ8_0}) {
    SCOPED_TRACE(GgmlTypeName(type));
    TestMatrix m = MakeMatrix(type, 19, 512, 5);
    const WeightMatrix w = Prepared(vulkan, m);
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
}

// max |a - b| / max |b| over two vectors.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  double scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

TEST(VulkanBackend, NormsAndElementwiseOperationsAgreeWithTheCpu) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  auto vws = b.vulkan->NewWorkspace({});
  auto cws = b.cpu->NewWorkspace({.n_threads = 1});
  const int rows = 3;
  const int width = 131;  // not a multiple of the workgroup
  const std::vector<float> x = RandomFloats(rows * width, 11);
  const std::vector<float> y = RandomFloats(rows * width, 12);
  const std::vector<float> weight = RandomFloats(width, 13);
  {
    std::vector<float> gpu(x.size());
    std::vector<float> cpu(x.size());
    b.vulkan->RmsNorm(x.data(), weight.data(), rows, width, 1e-5f, gpu.data(), *vws);
    b.cpu->RmsNorm(x.data(), weight.data(), rows, width, 1e-5f, cpu.data(), *cws);
    EXPECT_LE(RelativeError(gpu, cpu), 1e-6) << "RmsNorm";
  }
  std::vector<float> gpu = x;
  std::vector<float> cpu = x;
  b.vulkan->Add(gpu.data(), y.data(), rows, width, *vws);
  b.cpu->Add(cpu.data(), y.data(), rows, width, *cws);
  EXPECT_EQ(gpu, cpu) << "Add is one rounding";
  b.vulkan->Scale(gpu.data(), rows, width, 0.37f, *vws);
  b.cpu->Scale(cpu.data(), rows, width, 0.37f, *cws);
  EXPECT_EQ(gpu, cpu) << "Scale is one rounding";
  b.vulkan->SwiGlu(gpu.data(), y.data(), rows, width, *vws);
  b.cpu->SwiGlu(cpu.data(), y.data(), rows, width, *cws);
  EXPECT_LE(RelativeError(gpu, cpu), 1e-6) << "SwiGlu (the CPU's exp polynomial; fma may differ)";
  std::vector<float> capped_gpu = x, capped_cpu = x;
  for (float& v : capped_gpu) v *= 40.0f;  // past the cap's knee
  for (float& v : capped_cpu) v *= 40.0f;
  b.vulkan->SoftCap(capped_gpu.data(), rows, width, 30.0f, *vws);
  b.cpu->SoftCap(capped_cpu.data(), rows, width, 30.0f, *cws);
  EXPECT_LE(RelativeError(capped_gpu, capped_cpu), 1e-6) << "SoftCap (its own tanh, ~1e-7)";
  std::vector<float> oai_gpu = x, oai_cpu = x;
  for (float& v : oai_gpu) v *= 10.0f;  // some past the limit
  for (float& v : oai_cpu) v *= 10.0f;
  b.vulkan->SwiGluOai(oai_gpu.data(), y.data(), rows, width, 1.702f, 7.0f, *vws);
  b.cpu->SwiGluOai(oai_cpu.data(), y.data(), rows, width, 1.702f, 7.0f, *cws);
  EXPECT_LE(RelativeError(oai_gpu, oai_cpu), 1e-5) << "SwiGluOai (the device's exp)";
}

TEST(VulkanBackend, LayerNormBiasesAndActivationsAgreeWithTheCpu) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  auto vws = b.vulkan->NewWorkspace({});
  auto cws = b.cpu->NewWorkspace({.n_threads = 1});
  const int rows = 3;
  const int width = 131;
  std::vector<float> x = RandomFloats(rows * width, 51, 4.0f);  // past GELU's +-10 clamps too
  x[0] = -0.0f;
  x[1] = std::nanf("");
  x[2] = 10.0f;
  x[3] = -10.0f;
  x[4] = 1e-6f;  // an f16 subnormal
  const std::vector<float> y = RandomFloats(rows * width, 52);
  const std::vector<float> weight = RandomFloats(width, 53);
  const std::vector<float> bias = RandomFloats(width, 54);
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& c) {
    return a.size() == c.size() && std::memcmp(a.data(), c.data(), a.size() * 4) == 0;
  };
  {
    const std::vector<float> finite = RandomFloats(rows * width, 55, 3.0f);
    std::vector<float> gpu(x.size()), cpu(x.size());
    b.vulkan->LayerNorm(finite.data(), weight.data(), bias.data(), rows, width, 1e-5f, gpu.data(),
                        *vws);
    b.cpu->LayerNorm(finite.data(), weight.data(), bias.data(), rows, width, 1e-5f, cpu.data(),
                     *cws);
    EXPECT_LE(RelativeError(gpu, cpu), 1e-6) << "LayerNorm (float sums against the CPU's double)";
  }
  {
    // A bias over 40 of every row's 131 values (a strided view, as the models' fused QKV).
    std::vector<float> gpu = y, cpu = y;
    b.vulkan->AddBias(gpu.data() + 7, width, bias.data(), rows, 40, *vws);
    b.cpu->AddBias(cpu.data() + 7, width, bias.data(), rows, 40, *cws);
    EXPECT_TRUE(same_bits(gpu, cpu)) << "AddBias is one rounding per value";
  }
  std::vector<float> gpu = x, cpu = x;
  b.vulkan->Gelu(gpu.data(), rows, width, *vws);
  b.cpu->Gelu(cpu.data(), rows, width, *cws);
  EXPECT_TRUE(same_bits(gpu, cpu)) << "Gelu reads the CPU's f16 table at the CPU's f16 rounding";
  gpu = x;
  cpu = x;
  b.vulkan->GeGlu(gpu.data(), y.data(), rows, width, *vws);
  b.cpu->GeGlu(cpu.data(), y.data(), rows, width, *cws);
  EXPECT_TRUE(same_bits(gpu, cpu)) << "GeGlu";
  gpu = x;
  cpu = x;
  b.vulkan->Relu(gpu.data(), rows, width, *vws);
  b.cpu->Relu(cpu.data(), rows, width, *cws);
  EXPECT_TRUE(same_bits(gpu, cpu)) << "Relu (-0 and NaN give +0)";
}

TEST(VulkanBackend, ExpertOutputsAreSummedWithTheCpuBits) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  auto vws = b.vulkan->NewWorkspace({});
  auto cws = b.cpu->NewWorkspace({.n_threads = 1});
  constexpr int kRows = 5, kK = 3, kWidth = 77;
  const std::vector<float> src = RandomFloats(kRows * kK * kWidth, 61);
  const std::vector<float> weights = RandomFloats(kRows * kK, 62);
  std::vector<float> gpu = RandomFloats(kRows * kWidth, 63);
  std::vector<float> cpu = gpu;
  b.vulkan->AddWeightedRows(gpu.data(), src.data(), weights.data(), kRows, kK, kWidth, *vws);
  b.cpu->AddWeightedRows(cpu.data(), src.data(), weights.data(), kRows, kK, kWidth, *cws);
  EXPECT_EQ(0, std::memcmp(gpu.data(), cpu.data(), gpu.size() * sizeof(float)))
      << "the k products in j order, no fma: the CPU's bits";
}

TEST(VulkanBackend, RopeAgreesWithTheCpuInEveryMode) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  auto vws = b.vulkan->NewWorkspace({});
  auto cws = b.cpu->NewWorkspace({.n_threads = 1});
  const int heads = 3;
  const int head_dim = 24;
  const std::vector<int32_t> positions = {0, 5, 1000, 77};
  const std::vector<float> x = RandomFloats(positions.size() * heads * head_dim, 21);
  const std::vector<float> divisors = {1, 2, 4, 8, 16, 1, 1, 3, 1, 1};
  RopeParams plain{.rope_dims = 20, .freq_base = 10000.0f};
  RopeParams split = plain;
  split.mode = RopeMode::kSplitHalves;
  split.freq_factors = divisors.data();
  RopeParams yarn = split;
  yarn.position_scale = 0.25f;
  yarn.ext_factor = 1.0f;
  yarn.corr_low = 2;
  yarn.corr_high = 7;
  yarn.mscale = 1.1f;
  for (const RopeParams& rope : {plain, split, yarn}) {
    std::vector<float> gpu = x;
    std::vector<float> cpu = x;
    b.vulkan->Rope(gpu.data(), positions, heads, head_dim, rope, *vws);
    b.cpu->Rope(cpu.data(), positions, heads, head_dim, rope, *cws);
    // The angles are the CPU's (rope_angles.h); a rotation is two products and a sum, which the
    // device may fuse.
    EXPECT_LE(RelativeError(gpu, cpu), 1e-6);
  }
}

TEST(VulkanBackend, HostMemoryArgumentsGiveTheBitsOfDeviceMemory) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  auto ws = vulkan.NewWorkspace({});
  TestMatrix m = MakeMatrix(GgmlType::kQ6_K, 7, 256, 31);
  const WeightMatrix w = Prepared(vulkan, m);
  const std::vector<float> x = RandomFloats(2 * 256, 32);
  std::vector<float> host_y(2 * 7, -1.0f);
  vulkan.Matmul(w, x.data(), 2, host_y.data(), *ws);  // staged in, copied back
  float* x_device = ws->Floats(3, x.size());
  std::copy(x.begin(), x.end(), x_device);
  float* y_device = ws->Floats(4, host_y.size());
  vulkan.Matmul(w, x_device, 2, y_device, *ws);
  EXPECT_EQ(host_y, std::vector<float>(y_device, y_device + host_y.size()));
  // A pointer inside a device buffer binds at an aligned offset below it: row 1 alone.
  std::vector<float> row1(7);
  vulkan.Matmul(w, x_device + 256, 1, y_device + 9, *ws);
  EXPECT_EQ(0, std::memcmp(y_device + 9, host_y.data() + 7, sizeof(float) * 7));
}

TEST(VulkanBackend, WeightVectorsAreCopiedToDeviceMemoryAtLoad) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  WeightVector v;
  v.host = {1.5f, -2.0f, 3.25f};
  WeightVector* vectors[] = {&v};
  std::shared_ptr<uint8_t> storage;
  EXPECT_GT(vulkan.PrepareWeights({}, vectors, AnyFile(), storage), 0u);
  ASSERT_NE(v.prepared, nullptr);
  EXPECT_NE(v.prepared, v.host.data());
  EXPECT_EQ(std::vector<float>(v.prepared, v.prepared + 3), v.host);
}

TEST(VulkanBackend, AnUnknownDeviceIsAnErrorNamingIt) {
  REQUIRE_VULKAN();
  setenv("KVSERVE_DEVICE", "99", 1);
  auto backend = MakeBackend("vulkan");
  unsetenv("KVSERVE_DEVICE");
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.message().find("99"), std::string::npos) << backend.message();
}

TEST(VulkanBackend, RunGivesTheCpuTextAndAWrongDeviceIsAFlagError) {
  REQUIRE_VULKAN();
  const std::string run = "run -m " + testing::ModelPath("stories260K.gguf") +
                          " -p 'Once upon a time' -n 32 --temp 0 --output-format json";
  std::string cpu_out, vulkan_out, err;
  ASSERT_EQ(testing::RunKvserve(run + " --backend cpu", &cpu_out, &err), 0) << err;
  ASSERT_EQ(testing::RunKvserve(run + " --backend vulkan --device 0", &vulkan_out, &err), 0) << err;
  const auto text = [](const std::string& json) {
    return nlohmann::json::parse(json)["text"].get<std::string>();
  };
  EXPECT_EQ(text(vulkan_out), text(cpu_out));
  EXPECT_FALSE(text(cpu_out).empty());
  EXPECT_EQ(testing::RunKvserve(run + " --backend vulkan --device 7", &vulkan_out, &err), 2);
  EXPECT_NE(err.find("--device 7"), std::string::npos) << err;
  EXPECT_EQ(testing::RunKvserve(run + " --backend vulkan --device -1", &vulkan_out, &err), 2);
  EXPECT_NE(err.find("flag --device"), std::string::npos) << err;
}

// A machine without the Vulkan loader (here: KVSERVE_VULKAN_LOADER naming a file that is not
// there) runs the CPU backend as before; `--backend vulkan` is refused naming the package, and
// doctor says why it lists no device.
TEST(VulkanBackend, WithoutTheLoaderOnlyTheVulkanBackendIsRefused) {
  if (!testing::VulkanInBuild()) GTEST_SKIP() << "this build has no Vulkan backend";
  setenv("KVSERVE_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);  // the children's
  const std::string run =
      "run -m " + testing::ModelPath("stories260K.gguf") + " -p 'Once upon a time' -n 8 --temp 0";
  std::string out, err;
  EXPECT_EQ(testing::RunKvserve(run + " --backend cpu", &out, &err), 0) << err;
  EXPECT_EQ(testing::RunKvserve(run + " --backend vulkan", &out, &err), 2);
  EXPECT_NE(err.find("libvulkan1"), std::string::npos) << err;
  ASSERT_EQ(testing::RunKvserve("doctor -t 1 -r 1 --bandwidth-mib 64", &out, &err), 0) << err;
  unsetenv("KVSERVE_VULKAN_LOADER");
  EXPECT_NE(out.find("gpu:        vulkan: the Vulkan loader"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvserve
