// vulkan_matmul_types_test: the Vulkan backend's matmul shaders of Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
// Q2_K and Q3_K weights, and its mixture routing (route_topk.comp), on device 0 (lavapipe in CI).
// - Each type's matmul is within a float-summation bound of the exact sum of its dequantized
//   weights times x as the shader reads x (rounded to the CPU's activation type: Q8_1 for Q4_1 and
//   Q5_1, Q8_0 for Q5_0, IQ4_NL and MXFP4, Q8_K for Q2_K and Q3_K), and within twice that of the
//   CPU backend, on odd shapes (one block, a few, more 32-element units than a workgroup's 64
//   threads); the largest differences from the CPU are printed per type.
// - A row's outputs are the same bits alone and in a batch of 16.
// - RouteTopK gives the CPU's ids exactly on random logits, on logits with many exact ties, for
//   every k from 1 to n_expert and n_expert past the workgroup's 64 threads; its weights are within
//   (k + 8) 2^-24 of the CPU's, relatively. Rows whose doubles tie what the logits order (near
//   ties, spreads past 600) and rows with infinities or NaN are the CPU's, bit for bit.
// A build without the backend skips; a build with it fails without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "support/vulkan_backends.h"
#include "support/vulkan_matmul_check.h"

namespace kvserve {
namespace {

using testing::CheckMatmul;
using testing::ExpectBatchOf16EqualsAlone;
using testing::GetBackends;
using testing::MakeMatrix;
using testing::MatmulDifference;
using testing::Prepared;
using testing::RandomFloats;
using testing::Shape;
using testing::TestMatrix;

constexpr GgmlType kTypes[] = {GgmlType::kQ4_1,   GgmlType::kQ5_0,  GgmlType::kQ5_1,
                               GgmlType::kIQ4_NL, GgmlType::kMXFP4, GgmlType::kQ2_K,
                               GgmlType::kQ3_K};

TEST(VulkanMatmulTypes, EachTypeAgreesWithExactSumsAndTheCpuOnOddShapes) {
  REQUIRE_VULKAN();
  uint32_t seed = 101;
  for (GgmlType type : kTypes) {
    const int block = static_cast<int>(TraitsOf(type).block_elements);
    // 67 units of 32 for the 32-blocks; 9 super-blocks (72 units) for the K-quants.
    const int many = block == 32 ? 67 * 32 : 9 * block;
    MatmulDifference worst;
    for (const Shape& s : {Shape{37, block, 1}, Shape{5, 2 * block, 3}, Shape{9, many, 2}}) {
      const MatmulDifference d = CheckMatmul(type, s, seed++);
      worst.max_abs = std::max(worst.max_abs, d.max_abs);
      worst.max_relative = std::max(worst.max_relative, d.max_relative);
    }
    std::cout << "[ measured ] " << GgmlTypeName(type) << ": max |vulkan - cpu| " << worst.max_abs
              << ", max |vulkan - cpu| / sum |w x| " << worst.max_relative << "\n";
  }
}

TEST(VulkanMatmulTypes, ARowIsTheSameBitsAloneAndInABatchOf16) {
  REQUIRE_VULKAN();
  const Backend& vulkan = *GetBackends().vulkan;
  for (GgmlType type : kTypes) ExpectBatchOf16EqualsAlone(vulkan, type);
}

// Router logits [n_rows, n_expert]: normal of deviation 3, or (ties) whole numbers in -2 .. 2.
std::vector<float> RouterLogits(int n_rows, int n_expert, bool ties, uint32_t seed) {
  std::vector<float> logits = RandomFloats(static_cast<size_t>(n_rows) * n_expert, seed, 3.0f);
  if (ties) {
    for (float& l : logits) l = std::clamp(std::round(l / 3.0f), -2.0f, 2.0f);
  }
  return logits;
}

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routing Route(const Backend& backend, const float* logits, int n_rows, int n_expert, int k) {
  Routing r{std::vector<int32_t>(static_cast<size_t>(n_rows) * k, -7),
            std::vector<float>(static_cast<size_t>(n_rows) * k, -7.0f)};
  auto ws = backend.NewWorkspace({.n_threads = 1});
  backend.RouteTopK(logits, n_rows, n_expert, k, r.ids.data(), r.weights.data(), *ws);
  return r;
}

TEST(VulkanRouteTopK, IdsAreTheCpusAndWeightsWithinRounding) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  auto vulkan_ws = b.vulkan->NewWorkspace({});
  constexpr int kRows = 6;
  double worst = 0;              // |vulkan - cpu| / cpu weight
  double worst_bound = 0;        // |vulkan - cpu| / bound
  int weights_not_cpu_bits = 0;  // the device's float softmax, not the CPU's doubles
  uint32_t seed = 1;
  for (int n_expert : {1, 3, 8, 33, 64, 65, 130}) {
    for (bool ties : {false, true}) {
      const std::vector<float> logits = RouterLogits(kRows, n_expert, ties, seed++);
      // Logits in device memory, bound in place (the models' router output), for even k.
      float* device_logits = vulkan_ws->Floats(0, logits.size());
      testing::WriteDevice(*b.vulkan, logits, device_logits);
      for (int k = 1; k <= n_expert; ++k) {
        if (n_expert > 65 && k > 9 && k < n_expert - 2) continue;
        SCOPED_TRACE("n_expert " + std::to_string(n_expert) + ", k " + std::to_string(k) +
                     (ties ? ", ties" : ""));
        const Routing cpu = Route(*b.cpu, logits.data(), kRows, n_expert, k);
        const Routing gpu =
            Route(*b.vulkan, k % 2 == 0 ? device_logits : logits.data(), kRows, n_expert, k);
        ASSERT_EQ(gpu.ids, cpu.ids);
        for (size_t i = 0; i < cpu.weights.size(); ++i) {
          const double error = std::fabs(static_cast<double>(gpu.weights[i]) - cpu.weights[i]);
          const double bound = (k + 8) * std::ldexp(1.0, -24) * cpu.weights[i] + 1e-37;
          worst = std::max(worst, error / std::max<double>(cpu.weights[i], 1e-30));
          worst_bound = std::max(worst_bound, error / bound);
          weights_not_cpu_bits += gpu.weights[i] != cpu.weights[i];
          EXPECT_LE(error, bound) << "weight " << i << ": " << gpu.weights[i] << " vs the cpu's "
                                  << cpu.weights[i];
        }
      }
    }
  }
  std::cout << "[ measured ] RouteTopK: max |vulkan - cpu| / cpu weight " << worst << ", at most "
            << worst_bound << " of the bound (" << weights_not_cpu_bits
            << " weights not the CPU's bits)\n";
  // Some of the thousands of weights round differently in float than in the CPU's doubles: were
  // every one the CPU's bits, the rows would all have gone to the CPU.
  EXPECT_GT(weights_not_cpu_bits, 0) << "every row was routed on the CPU, none on the device";
}

TEST(VulkanRouteTopK, RowsTheDoublesRankOtherwiseAreRoutedAsTheCpuRoutesThem) {
  REQUIRE_VULKAN();
  const testing::VulkanAndCpu& b = GetBackends();
  constexpr int kExperts = 5;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {
      // Near ties: the doubles' exps are all 1, ties by index (0, 1, 2), the logits rank 2, 0, 1.
      1e-20f, 0.0f, 3e-20f, -1.0f, -2.0f,
      // A plain row between them, routed on the device.
      0.5f, -1.5f, 2.0f, 0.25f, 1.0f,
      // Past the doubles' range: exp gives 0 for all but expert 2, ties by index.
      -900.0f, -800.0f, 0.0f, -1000.0f, -750.0f,
      // Infinity and NaN: whatever the CPU makes of them.
      1.0f, inf, 2.0f, -inf, 0.0f, 1.0f, std::nanf(""), 2.0f, 3.0f, 0.0f,
      // Denormals.
      1e-45f, 0.0f, 2e-45f, -1e-45f, 0.0f};
  const int rows = static_cast<int>(logits.size()) / kExperts;
  for (int k = 1; k <= kExperts; ++k) {
    SCOPED_TRACE("k " + std::to_string(k));
    const Routing cpu = Route(*b.cpu, logits.data(), rows, kExperts, k);
    const Routing gpu = Route(*b.vulkan, logits.data(), rows, kExperts, k);
    EXPECT_EQ(gpu.ids, cpu.ids);
    for (int r : {0, 2, 3, 4}) {
      EXPECT_EQ(
          0, std::memcmp(gpu.weights.data() + r * k, cpu.weights.data() + r * k, sizeof(float) * k))
          << "row " << r << ": the CPU's weights";
    }
  }
}

}  // namespace
}  // namespace kvserve
