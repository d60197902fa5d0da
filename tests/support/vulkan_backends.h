// The Vulkan backend and the CPU backend its results are compared with, made once per test
// binary, and REQUIRE_VULKAN(): a build without the Vulkan backend skips the test, a build with it
// fails when it finds no device (lavapipe in CI: scripts/install-deps.sh installs it).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

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

}  // namespace kvserve::testing

#define REQUIRE_VULKAN()                                                                        \
  if (!::kvserve::testing::VulkanInBuild()) GTEST_SKIP() << "this build has no Vulkan backend"; \
  ASSERT_NE(::kvserve::testing::GetBackends().vulkan, nullptr)                                  \
      << "the build has the Vulkan backend but it found no device (install "                    \
         "mesa-vulkan-drivers for lavapipe): "                                                  \
      << ::kvserve::testing::GetBackends().error
