// The backend tests load models on: the one KVSERVE_BACKEND names ("cpu" when unset), made by the
// registry as the command line makes it, so the suite runs on every backend and, through the
// CPU backend's own settings (KVSERVE_ISA, KVSERVE_PACK), on every kernel table.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"

namespace kvserve {

inline const Backend& TestBackend() {
  static const std::unique_ptr<Backend> backend = [] {
    auto made = MakeBackend(DefaultBackendName());
    if (!made.ok()) {
      std::fprintf(stderr, "KVSERVE_BACKEND: %s\n", made.message().c_str());
      std::abort();
    }
    return std::move(*made);
  }();
  return *backend;
}

}  // namespace kvserve
