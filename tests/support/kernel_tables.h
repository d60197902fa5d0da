// The kernel tables a test can run on this machine.
#pragma once

#include <cstdlib>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace kvserve::testing {

// The table the CPU backend picks under this environment (KVSERVE_ISA caps it), for tests of the
// CPU kernels themselves.
inline const KernelTable& TestCpuKernels() {
  const char* isa = std::getenv("KVSERVE_ISA");
  return KernelsFor(isa != nullptr ? isa : "");
}

// The fast tables: every ISA compiled into this build that this CPU supports.
inline std::vector<const KernelTable*> FastTables() {
  std::vector<const KernelTable*> tables;
  if (Avx2Kernels() != nullptr && CpuSupportsAvx2()) tables.push_back(Avx2Kernels());
  if (AvxVnniKernels() != nullptr && CpuSupportsAvxVnni()) tables.push_back(AvxVnniKernels());
  if (Avx512Kernels() != nullptr && CpuSupportsAvx512()) tables.push_back(Avx512Kernels());
  return tables;
}

}  // namespace kvserve::testing
