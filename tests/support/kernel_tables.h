// The kernel tables a test can run on this machine.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/scratch_buffer.h"

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
  if (AmxKernels() != nullptr && CpuSupportsAmx()) tables.push_back(AmxKernels());
  return tables;
}

// Runs one tile function on weight rows [n_begin, n_end) of `w` (rows or groups w_row_bytes apart)
// against m activation rows of `x` (x_row_bytes apart, in the tile's activation format): y is
// [m, n], -1 where the tile wrote nothing.
inline std::vector<float> RunTile(MatmulTileFn fn, const uint8_t* w, size_t w_row_bytes,
                                  const uint8_t* x, size_t x_row_bytes, int m, int k, int n_begin,
                                  int n_end, int n) {
  std::vector<float> y(static_cast<size_t>(m) * n, -1.0f);
  TileScratch scratch;
  fn(MatmulTile{.w = w,
                .w_row_bytes = w_row_bytes,
                .x = x,
                .x_row_bytes = x_row_bytes,
                .m = m,
                .k = k,
                .n_begin = n_begin,
                .n_end = n_end,
                .y = y.data(),
                .ldy = n,
                .scratch = &scratch});
  return y;
}

}  // namespace kvserve::testing
