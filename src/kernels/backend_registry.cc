#include "kernels/backend_registry.h"

#include <cstdlib>

#include "kernels/cpu/cpu_backend.h"
#if KVSERVE_WITH_VULKAN
#include "kernels/vulkan/vulkan_backend.h"
#endif

namespace kvserve {

namespace {

Result<std::unique_ptr<Backend>> MakeCpuBackend() {
  return std::unique_ptr<Backend>(
      std::make_unique<CpuBackend>(CpuBackendOptions::FromEnvironment()));
}

#if KVSERVE_WITH_VULKAN
Result<std::unique_ptr<Backend>> MakeVulkanBackend() {
  Result<VulkanBackendOptions> options = VulkanBackendOptions::FromEnvironment();
  if (!options.ok()) return options.status();
  return VulkanBackend::Make(*options);
}

Result<std::vector<std::string>> ListVulkanDevices() {
  auto devices = VulkanDevice::List();
  if (!devices.ok()) return devices.status();
  std::vector<std::string> lines;
  for (const VulkanDeviceInfo& d : *devices) lines.push_back(DescribeVulkanDevice(d));
  return lines;
}
#endif

// One entry per backend folder compiled in.
constexpr BackendEntry kBackends[] = {
    {.name = "cpu",
     .summary = "CPU kernels: scalar, AVX2, AVX-VNNI and AVX-512 tables, chosen by the CPU",
     .make = &MakeCpuBackend},
#if KVSERVE_WITH_VULKAN
    {.name = "vulkan",
     .summary = "Vulkan compute shaders (matmuls, norms, RoPE, KV stores, attention), the rest on "
                "the CPU backend; device --device N / KVSERVE_DEVICE",
     .make = &MakeVulkanBackend,
     .devices = &ListVulkanDevices},
#endif
};

}  // namespace

std::span<const BackendEntry> RegisteredBackends() { return kBackends; }

std::string BackendNames() {
  std::string names;
  for (const BackendEntry& entry : kBackends) {
    names += (names.empty() ? "" : ", ") + std::string(entry.name);
  }
  return names;
}

std::string DefaultBackendName() {
  const char* name = std::getenv("KVSERVE_BACKEND");
  return name != nullptr && *name != '\0' ? name : kBackends[0].name;
}

Result<std::unique_ptr<Backend>> MakeBackend(std::string_view name) {
  for (const BackendEntry& entry : kBackends) {
    if (name == entry.name) return entry.make();
  }
  std::string hint;
  if (name == "vulkan") {
    hint =
        "; the Vulkan backend is built when libvulkan-dev and glslc are installed "
        "(scripts/install-deps.sh)";
  }
  return Status::InvalidArgument("backend '" + std::string(name) +
                                 "' is not in this build (it has: " + BackendNames() + ")" + hint);
}

}  // namespace kvserve
