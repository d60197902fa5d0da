// The Vulkan backend and the CPU backend its results are compared with, made once per test
// binary, and REQUIRE_VULKAN(): a build without the Vulkan backend skips the test, a build with it
// fails when it finds no device (lavapipe in CI: scripts/install-deps.sh installs it).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"

namespace kvserve::testing {

inline bool VulkanInBuild() {
  for (const BackendEntry& entry : RegisteredBackends()) {
    if (std::string(entry.name) == "vulkan") return true;
  }
  return false;
}

struct VulkanAndCpu {
  std::unique_ptr<Backend> vulkan;  // null when it could not be made (`error` says why)
  std::unique_ptr<Backend> cpu;
  std::string error;
};

inline const VulkanAndCpu& GetBackends() {
  static const VulkanAndCpu backends = [] {
    VulkanAndCpu b;
    auto vulkan = MakeBackend("vulkan");
    if (vulkan.ok()) {
      b.vulkan = std::move(vulkan.value());
    } else {
      b.error = vulkan.message();
    }
    b.cpu = std::move(MakeBackend("cpu").value());
    return b;
  }();
  return backends;
}

// A backend's memory (a workspace's Floats, a KV pool) written and read through its allocator,
// as the engine does: the Vulkan backend's recorded dispatches run first (VulkanDevice::Flush).
inline void WriteDevice(const Backend& backend, const std::vector<float>& values, float* device) {
  backend.allocator().CopyFromHost(reinterpret_cast<const uint8_t*>(values.data()),
                                   sizeof(float) * values.size(),
                                   reinterpret_cast<uint8_t*>(device));
}
inline std::vector<float> ReadDevice(const Backend& backend, const float* device, size_t n) {
  std::vector<float> out(n);
  backend.allocator().CopyToHost(reinterpret_cast<const uint8_t*>(device), sizeof(float) * n,
                                 reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

}  // namespace kvserve::testing

#define REQUIRE_VULKAN()                                                                        \
  if (!::kvserve::testing::VulkanInBuild()) GTEST_SKIP() << "this build has no Vulkan backend"; \
  ASSERT_NE(::kvserve::testing::GetBackends().vulkan, nullptr)                                  \
      << "the build has the Vulkan backend but it found no device (install "                    \
         "mesa-vulkan-drivers for lavapipe): "                                                  \
      << ::kvserve::testing::GetBackends().error
