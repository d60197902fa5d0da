// The backend every command runs on, chosen once at start-up from the environment
// (CpuBackendOptions::FromEnvironment: KVSERVE_ISA, KVSERVE_PACK) and passed down from here.
#pragma once

#include "kernels/cpu/cpu_backend.h"

namespace kvserve {

// Built on first use; lives until exit.
const CpuBackend& CliBackend();

}  // namespace kvserve
