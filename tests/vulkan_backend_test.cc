// vulkan_backend_test: the Vulkan backend's shaders (kernels/vulkan/) against exact sums and the
// CPU backend, on random inputs over odd shapes, on whatever Vulkan device is device 0 (lavapipe
// in CI: scripts/install-deps.sh installs it).
// - Matmul for F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K (the other types with shaders:
//   vulkan_matmul_types_test) is within a float-summation bound of the exact sum of the
//   dequantized weights times x as it reads x (rounded to Q8_0 or Q8_K for the quantized types, as
//   the CPU backend rounds it), and within twice that of the CPU backend (plus the CPU's f16/bf16
//   rounding of x for those weights): support/vulkan_matmul_check.h. Outputs past 32768 (a second
//   row of workgroups) included.
// - A row's outputs are the same bits alone and in a batch of 16 (fixed reduction order).
// - RMS norm, layer norm, add, bias, scale, SwiGLU (and gpt-oss's), soft-cap and RoPE (both
//   pairings, divisors, YaRN) agree with the CPU; GELU, GeGLU (the CPU's f16 table, NaN, -0, the
//   +-10 clamps, subnormals), ReLU and bias give its bits.
// - Arguments in plain host memory are staged and copied back: the same bits as in device memory.
// - Operations on device memory are recorded and run, in order, when the host reads the results;
//   a float model's decode step waits for the device once (every dispatch with
//   KVSERVE_VULKAN_SYNC=1); x is rounded to Q8_0, Q8_1 and Q8_K on the device with the CPU's bytes.
// - Weights are copied to device memory at load (the matrix's `packed`, each vector's `prepared`);
//   in device-only memory (KVSERVE_VULKAN_WEIGHTS=device, a discrete GPU's default) through the
//   staging copy, past one staging buffer, the same bits back and the same products.
// A build without the backend skips; a build with it fails without a device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "support/cli.h"
#include "support/paths.h"
#include "support/vulkan_backends.h"
#include "support/vulkan_matmul_check.h"

namespace kvserve {
namespace {

using testing::AnyFile;
using testing::CheckMatmul;
using testing::ExpectBatchOf16EqualsAlone;
using testing::GetBackends;
using testing::MakeMatrix;
using testing::Prepared;
using testing::RandomFloats;
using testing::ReadDevice;
using testing::Shape;
using testing::TestMatrix;
using testing::WriteDevice;

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
    ExpectBatchOf16EqualsAlone(vulkan, type);
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
  WriteDevice(vulkan, x, x_device);
  float* y_device = ws->Floats(4, host_y.size());
  vulkan.Matmul(w, x_device, 2, y_device, *ws);
  EXPECT_EQ(host_y, ReadDevice(vulkan, y_device, host_y.size()));
  // A pointer inside a device buffer binds at an aligned offset below it: row 1 alone.
  vulkan.Matmul(w, x_device + 256, 1, y_device + 9, *ws);
  EXPECT_EQ(std::vector<float>(host_y.begin() + 7, host_y.end()),
            ReadDevice(vulkan, y_device + 9, 7));
}

// Operations on device memory are recorded and run together when the host needs their results:
// nothing has run before then, they run in order, and reading through the allocator (as the
// engine reads KV blocks) runs them first.
TEST(VulkanBackend, DeviceOperationsRunInOrderWhenTheHostReadsTheirResults) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  const Backend& cpu = *GetBackends().cpu;
  auto ws = vulkan.NewWorkspace({});
  auto cpu_ws = cpu.NewWorkspace({});
  constexpr int kRows = 3, kWidth = 37;
  std::vector<float> x = RandomFloats(kRows * kWidth, 41);
  const std::vector<float> y = RandomFloats(kRows * kWidth, 42);
  float* x_device = ws->Floats(0, x.size());
  float* y_device = ws->Floats(1, y.size());
  WriteDevice(vulkan, x, x_device);
  WriteDevice(vulkan, y, y_device);
  vulkan.Add(x_device, y_device, kRows, kWidth, *ws);
  vulkan.Scale(x_device, kRows, kWidth, 0.75f, *ws);
  vulkan.Add(x_device, y_device, kRows, kWidth, *ws);
  // Still the host's bytes: the three are recorded, not run (a plain read, not the allocator's).
  EXPECT_EQ(0, std::memcmp(x_device, x.data(), sizeof(float) * x.size()));
  cpu.Add(x.data(), y.data(), kRows, kWidth, *cpu_ws);
  cpu.Scale(x.data(), kRows, kWidth, 0.75f, *cpu_ws);
  cpu.Add(x.data(), y.data(), kRows, kWidth, *cpu_ws);
  EXPECT_EQ(x, ReadDevice(vulkan, x_device, x.size()));
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

// A Vulkan backend whose matrices go to memory the host cannot map (KVSERVE_VULKAN_WEIGHTS=device,
// what a discrete GPU gets without it), or null with the test failed.
std::unique_ptr<Backend> BackendWithDeviceOnlyWeights() {
  setenv("KVSERVE_VULKAN_WEIGHTS", "device", 1);
  auto made = MakeBackend("vulkan");
  unsetenv("KVSERVE_VULKAN_WEIGHTS");
  EXPECT_TRUE(made.ok()) << made.message();
  if (!made.ok()) return nullptr;
  EXPECT_NE(made.value()->device().find("weights in device-only memory"), std::string::npos)
      << made.value()->device();
  return std::move(made.value());
}

// The staging copies reach device-only memory: a 40 MB matrix (more than one 32 MiB staging
// buffer) reads back through the allocator as the file's bytes, at an odd offset and length too.
TEST(VulkanBackend, DeviceOnlyWeightsReadBackAsTheFilesBytes) {
  REQUIRE_VULKAN();
  const std::unique_ptr<Backend> device_only = BackendWithDeviceOnlyWeights();
  ASSERT_NE(device_only, nullptr);
  constexpr int kOut = 10000, kIn = 1000;
  std::vector<float> values = RandomFloats(static_cast<size_t>(kOut) * kIn, 5);
  WeightMatrix w{.type = GgmlType::kF32,
                 .data = reinterpret_cast<const uint8_t*>(values.data()),
                 .n_out = kOut,
                 .n_in = kIn,
                 .row_bytes = kIn * sizeof(float)};
  WeightMatrix* list[] = {&w};
  std::shared_ptr<uint8_t> storage;
  EXPECT_GE(device_only->PrepareWeights(list, {}, AnyFile(), storage), values.size() * 4);
  ASSERT_NE(w.packed, nullptr);
  std::vector<uint8_t> back(values.size() * sizeof(float));
  device_only->allocator().CopyToHost(w.packed, back.size(), back.data());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), back.size()), 0);
  constexpr size_t kOffset = 4099, kBytes = 33 * 1048576 + 7;
  std::vector<uint8_t> part(kBytes);
  for (size_t i = 0; i < kBytes; ++i) part[i] = static_cast<uint8_t>(i * 131 + 7);
  uint8_t* packed = const_cast<uint8_t*>(w.packed);
  device_only->allocator().CopyFromHost(part.data(), kBytes, packed + kOffset);
  std::vector<uint8_t> part_back(kBytes);
  device_only->allocator().CopyToHost(packed + kOffset, kBytes, part_back.data());
  EXPECT_EQ(part_back, part);
  std::vector<uint8_t> before(kOffset);
  device_only->allocator().CopyToHost(packed, kOffset, before.data());
  EXPECT_EQ(std::memcmp(before.data(), values.data(), kOffset), 0);  // untouched
}

// The products of matrices in device-only memory are the bits of the same matrices in mapped
// memory, for a float and two quantized types, alone and in a batch.
TEST(VulkanBackend, DeviceOnlyWeightsGiveTheBitsOfMappedWeights) {
  REQUIRE_VULKAN();
  const Backend& mapped = *GetBackends().vulkan;
  ASSERT_NE(mapped.device().find("weights in mapped memory"), std::string::npos) << mapped.device();
  const std::unique_ptr<Backend> device_only = BackendWithDeviceOnlyWeights();
  ASSERT_NE(device_only, nullptr);
  uint32_t seed = 11;
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    for (int n_rows : {1, 5}) {
      TestMatrix m = MakeMatrix(type, 45, 512, seed);
      TestMatrix same = MakeMatrix(type, 45, 512, seed++);  // each holds one backend's copy
      const WeightMatrix on_mapped = Prepared(mapped, m);
      const WeightMatrix on_device = Prepared(*device_only, same);
      const std::vector<float> x = RandomFloats(static_cast<size_t>(n_rows) * 512, seed++);
      std::vector<float> y_mapped(45 * n_rows), y_device(45 * n_rows);
      auto mapped_ws = mapped.NewWorkspace({});
      auto device_ws = device_only->NewWorkspace({});
      mapped.Matmul(on_mapped, x.data(), n_rows, y_mapped.data(), *mapped_ws);
      device_only->Matmul(on_device, x.data(), n_rows, y_device.data(), *device_ws);
      EXPECT_EQ(std::memcmp(y_mapped.data(), y_device.data(), y_mapped.size() * 4), 0)
          << TraitsOf(type).name << ", " << n_rows << " rows";
    }
  }
}

// A decode step of a float model (stories260K: every operation but the embedding lookup has a
// shader) records its dispatches and waits for the device once per token, for the logits (host
// memory). KVSERVE_VULKAN_SYNC=1 waits for each dispatch. `bench --profile` counts both.
TEST(VulkanBackend, AFloatModelsDecodeStepWaitsForTheDeviceOnce) {
  REQUIRE_VULKAN();
  const std::string bench = "bench -m " + testing::ModelPath("stories260K.gguf") +
                            " --backend vulkan -p 0 -n 8 -r 1 -t 1 --profile -o json";
  // Per token over the profile's ops: {dispatches, waits}.
  const auto per_token = [&](const char* sync) {
    setenv("KVSERVE_VULKAN_SYNC", sync, 1);  // the child's
    std::string out, err;
    const int rc = testing::RunKvserve(bench, &out, &err);
    unsetenv("KVSERVE_VULKAN_SYNC");
    EXPECT_EQ(rc, 0) << err;
    double dispatches = 0, waits = 0;
    const nlohmann::json report = nlohmann::json::parse(out);
    for (const auto& op : report["profiles"][0]["ops"]) {
      dispatches += op["device_dispatches_per_token"].get<double>();
      waits += op["device_waits_per_token"].get<double>();
    }
    return std::pair{dispatches, waits};
  };
  const auto [dispatches, waits] = per_token("0");
  EXPECT_GT(dispatches, 40.0);  // 5 layers of about 16 operations
  EXPECT_EQ(waits, 1.0);
  const auto [sync_dispatches, sync_waits] = per_token("1");
  EXPECT_EQ(sync_dispatches, dispatches);
  EXPECT_EQ(sync_waits, sync_dispatches);
}

// Row gathers, copies and scatters move the CPU's bits (NaN payloads and -0 included), from and to
// device memory and host memory.
TEST(VulkanBackend, RowMovesGiveTheCpusBits) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  const Backend& cpu = *GetBackends().cpu;
  auto ws = vulkan.NewWorkspace({});
  auto cpu_ws = cpu.NewWorkspace({});
  constexpr int kWidth = 7;
  constexpr size_t kStride = 11;
  std::vector<float> src = RandomFloats(6 * kStride, 51);
  src[3] = -0.0f;
  src[4] = std::bit_cast<float>(0x7fc01234u);  // a NaN with a payload
  const std::vector<int32_t> rows = {5, 0, 3, 3};
  float* src_device = ws->Floats(0, src.size());
  WriteDevice(vulkan, src, src_device);
  const auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> out(v.size());
    std::memcpy(out.data(), v.data(), sizeof(float) * v.size());
    return out;
  };
  // Gather 4 rows, copy 5 rows, scatter 3 rows into 6 rows of kStride.
  std::vector<float> gathered(rows.size() * kWidth), copied(5 * kWidth);
  cpu.GatherRows(src.data(), kStride, rows, kWidth, gathered.data(), *cpu_ws);
  cpu.CopyRows(src.data(), kStride, 5, kWidth, copied.data(), *cpu_ws);
  const std::vector<int32_t> places = {4, 1, 2};
  std::vector<float> scattered(6 * kStride, 9.0f);
  cpu.ScatterRows(src.data(), kWidth, places, kStride, scattered.data(), *cpu_ws);
  for (bool host : {false, true}) {
    SCOPED_TRACE(host ? "host memory" : "device memory");
    const float* from = host ? src.data() : src_device;
    std::vector<float> g(gathered.size()), c(copied.size()), sc(scattered.size(), 9.0f);
    float* g_dst = host ? g.data() : ws->Floats(1, g.size());
    float* c_dst = host ? c.data() : ws->Floats(2, c.size());
    float* s_dst = host ? sc.data() : ws->Floats(3, sc.size());
    if (!host) WriteDevice(vulkan, sc, s_dst);
    vulkan.GatherRows(from, kStride, rows, kWidth, g_dst, *ws);
    vulkan.CopyRows(from, kStride, 5, kWidth, c_dst, *ws);
    vulkan.ScatterRows(from, kWidth, places, kStride, s_dst, *ws);
    if (!host) {
      g = ReadDevice(vulkan, g_dst, g.size());
      c = ReadDevice(vulkan, c_dst, c.size());
      sc = ReadDevice(vulkan, s_dst, sc.size());
    }
    EXPECT_EQ(bits(g), bits(gathered));
    EXPECT_EQ(bits(c), bits(copied));
    EXPECT_EQ(bits(sc), bits(scattered));
  }
}

// x is rounded to Q8_0, Q8_1 and Q8_K on the device (quantize_rows.comp) with the CPU
// quantizer's bytes, ties and zero blocks included (VulkanBackend::CheckQuantizeShaders), so a
// quantized model's matmuls need no wait for the host to round x.
TEST(VulkanBackend, XIsRoundedOnTheDeviceWithTheCpuQuantizersBytes) {
  REQUIRE_VULKAN();
  int found = 0;
  for (const KernelCheck& check : GetBackends().vulkan->CheckKernels()) {
    if (check.what.rfind("vulkan quantize ", 0) != 0) continue;
    ++found;
    EXPECT_TRUE(check.ok) << check.what << ": " << check.max_error << " bytes differ";
  }
  EXPECT_EQ(found, 3);
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
