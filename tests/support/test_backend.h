// The backend tests load models on: the CPU backend as the environment asks (KVSERVE_ISA,
// KVSERVE_PACK), like the command line, so the suite can run on every kernel table.
#pragma once

#include "kernels/cpu/cpu_backend.h"

namespace kvserve {

inline const CpuBackend& TestBackend() {
  static const CpuBackend backend(CpuBackendOptions::FromEnvironment());
  return backend;
}

}  // namespace kvserve
