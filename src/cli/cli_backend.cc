#include "cli/cli_backend.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels/backend_registry.h"

namespace kvserve {

namespace {

// Backends by registry name, each built once; they live until exit (models hold references).
Result<const Backend*> BackendNamed(const std::string& name) {
  static std::mutex mutex;
  static auto* built = new std::map<std::string, std::unique_ptr<Backend>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = built->find(name); it != built->end()) return it->second.get();
  auto backend = MakeBackend(name);
  if (!backend.ok()) return backend.status();
  const Backend* raw = backend->get();
  built->emplace(name, std::move(*backend));
  return raw;
}

}  // namespace

Flag BackendFlag() {
  return {.name = "--backend",
          .value_name = "NAME",
          .default_text = "KVSERVE_BACKEND, else cpu",
          .help = "where the kernels run: " + BackendNames()};
}

Flag DeviceFlag() {
  return {.name = "--device",
          .value_name = "N",
          .default_text = "KVSERVE_DEVICE, else 0",
          .help = "which device of a GPU backend (kvserve doctor lists them)"};
}

Result<const Backend*> CliBackend(const Args& args) {
  if (args.Has("--device")) {
    auto device = args.GetInt("--device", 0);
    if (!device.ok()) return device.status();
    if (*device < 0 || *device > 1024) {
      return Status::InvalidArgument("flag --device: " + std::to_string(*device) +
                                     " is not a device index (0 .. 1024)");
    }
    setenv("KVSERVE_DEVICE", std::to_string(*device).c_str(), 1);
  }
  const std::string name = args.GetOr("--backend", DefaultBackendName());
  auto backend = BackendNamed(name);
  if (!backend.ok()) return Status::InvalidArgument("flag --backend: " + backend.message());
  return backend;
}

const Backend& CliBackend() {
  auto backend = BackendNamed(DefaultBackendName());
  if (!backend.ok()) {
    std::fprintf(stderr, "kvserve: KVSERVE_BACKEND: %s\n", backend.message().c_str());
    std::exit(2);
  }
  return **backend;
}

}  // namespace kvserve
