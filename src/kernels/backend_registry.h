// The backends this build has, by name: what `--backend NAME` (or KVSERVE_BACKEND) chooses among
// in the CLI, bench, doctor and the tests. Nothing above kernels/ names a backend's class or
// includes a backend's folder; it asks this registry. A new backend is a folder kernels/<name>/
// and one entry in backend_registry.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "util/status.h"

namespace kvserve {

struct BackendEntry {
  const char* name;     // "cpu": the prefix of Backend::name() ("cpu-avx2")
  const char* summary;  // one line for `kvserve doctor`
  // Builds the backend. It reads its own settings from the environment (the CPU:
  // KVSERVE_ISA, KVSERVE_PACK, KVSERVE_DECODE_TILE), so only entry points call it.
  Result<std::unique_ptr<Backend>> (*make)();
  // The devices it can run on, one line each ("0: NVIDIA H200 (discrete, Vulkan 1.3.289), 140.0
  // GiB, subgroup 32, cooperative matrix yes"), or an error saying why there are none; nullptr
  // for a backend that runs where kvserve runs (the CPU).
  Result<std::vector<std::string>> (*devices)() = nullptr;
};

// Every backend compiled in, the default ("cpu") first.
std::span<const BackendEntry> RegisteredBackends();

// The backend called `name`; an unknown name is an error that lists the known ones.
Result<std::unique_ptr<Backend>> MakeBackend(std::string_view name);

// "cpu, vulkan": the registered names, for help texts and errors.
std::string BackendNames();

// The backend entry points use when no flag names one: KVSERVE_BACKEND when set and not empty,
// else "cpu". The CLI and the tests both ask here, so they agree.
std::string DefaultBackendName();

}  // namespace kvserve
