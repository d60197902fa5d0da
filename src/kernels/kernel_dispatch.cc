#include <cstdlib>
#include <cstring>

#include "kernels/kernels.h"

namespace kvserve {

bool CpuSupportsAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

bool CpuSupportsAvx512() {
  __builtin_cpu_init();
  return CpuSupportsAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("avx512bf16");
}

namespace {
const KernelTable& Choose() {
  const char* forced = std::getenv("KVSERVE_ISA");
  const std::string want = forced ? forced : "";
  if (want == "scalar") return ScalarKernels();
  if ((want.empty() || want == "avx512") && Avx512Kernels() && CpuSupportsAvx512()) {
    return *Avx512Kernels();
  }
  if ((want.empty() || want == "avx512" || want == "avx2") && Avx2Kernels() && CpuSupportsAvx2()) {
    return *Avx2Kernels();
  }
  return ScalarKernels();
}
}  // namespace

const KernelTable& ActiveKernels() {
  static const KernelTable& table = Choose();
  return table;
}

MatmulTileFn MatmulFor(const KernelTable& table, GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return table.matmul_f32;
    case GgmlType::kF16:
      return table.matmul_f16;
    case GgmlType::kBF16:
      return table.matmul_bf16;
    case GgmlType::kQ8_0:
      return table.matmul_q8_0;
    case GgmlType::kQ4_0:
      return table.matmul_q4_0;
    default:
      return nullptr;
  }
}

MatmulTileFn PackedMatmulFor(const KernelTable& table, GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return table.matmul_q8_0_x16;
    case GgmlType::kQ4_0:
      return table.matmul_q4_0_x16;
    default:
      return nullptr;
  }
}

}  // namespace kvserve
