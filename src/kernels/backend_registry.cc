#include "kernels/backend_registry.h"

#include <cstdlib>

#include "kernels/cpu/cpu_backend.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Backend>> MakeCpuBackend() {
  return std::unique_ptr<Backend>(
      std::make_unique<CpuBackend>(CpuBackendOptions::FromEnvironment()));
}

// One entry per backend folder compiled in.
constexpr BackendEntry kBackends[] = {
    {.name = "cpu",
     .summary = "CPU kernels: scalar, AVX2, AVX-VNNI and AVX-512 tables, chosen by the CPU",
     .make = &MakeCpuBackend},
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
  return Status::InvalidArgument("backend '" + std::string(name) +
                                 "' is not in this build (it has: " + BackendNames() + ")");
}

}  // namespace kvserve
