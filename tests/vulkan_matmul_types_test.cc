// vulkan_matmul_types_test: the Vulkan backend's matmul shaders of Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
// Q2_K and Q3_K weights, on device 0 (lavapipe in CI).
// - Each type's matmul is within a float-summation bound of the exact sum of its dequantized
//   weights times x as the shader reads x (rounded to the CPU's activation type: Q8_1 for Q4_1 and
//   Q5_1, Q8_0 for Q5_0, IQ4_NL and MXFP4, Q8_K for Q2_K and Q3_K), and within twice that of the
//   CPU backend, on odd shapes (one block, a few, more 32-element units than a workgroup's 64
//   threads); the largest differences from the CPU are printed per type.
// - A row's outputs are the same bits alone and in a batch of 16.
// A build without the backend skips; a build with it fails without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <vector>

#include "kernels/backend.h"
#include "support/vulkan_backends.h"
#include "support/vulkan_matmul_check.h"

namespace kvserve {
namespace {

using testing::CheckMatmul;
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
  for (GgmlType type : kTypes) {
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
}

}  // namespace
}  // namespace kvserve
