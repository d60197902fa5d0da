#include "cli/cli_backend.h"

namespace kvserve {

const CpuBackend& CliBackend() {
  static const CpuBackend backend(CpuBackendOptions::FromEnvironment());
  return backend;
}

}  // namespace kvserve
