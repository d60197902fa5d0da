#include <cpuid.h>

#include <string_view>

#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/quant_matmul.h"

namespace kvserve {

namespace {

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool CpuSupportsF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 29) & 1u);
}

// The tables from the plainest to the widest; KernelsFor takes the widest the CPU supports up to
// the one asked for (an unknown name: scalar).
enum class IsaLevel { kScalar, kAvx2, kAvxVnni, kAvx512, kAmx };

IsaLevel LevelOf(std::string_view isa) {
  if (isa.empty() || isa == "amx") return IsaLevel::kAmx;
  if (isa == "avx512") return IsaLevel::kAvx512;
  if (isa == "avxvnni") return IsaLevel::kAvxVnni;
  if (isa == "avx2") return IsaLevel::kAvx2;
  return IsaLevel::kScalar;
}

}  // namespace

bool CpuSupportsAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuSupportsF16c();
}

// CPUID leaf 7, sub-leaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports does not know it).
bool CpuSupportsAvxVnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!CpuSupportsAvx2() || __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 4) & 1u;
}

const KernelTable* AvxVnniKernels() {
  if (Avx2Kernels() == nullptr) return nullptr;
  static const KernelTable table = [] {
    KernelTable t = *Avx2Kernels();
    t.isa = "avxvnni";
    t.matmul_q8_0 = avxvnni::MatmulQ8_0;
    t.matmul_q4_0 = avxvnni::MatmulQ4_0;
    t.matmul_q8_0_x16 = avxvnni::MatmulQ8_0x16;
    t.matmul_q4_0_x16 = avxvnni::MatmulQ4_0x16;
    t.matmul_q4_k_x16 = avxvnni::MatmulQ4_Kx16;
    t.matmul_q5_k_x16 = avxvnni::MatmulQ5_Kx16;
    t.matmul_q4_1_x16 = avxvnni::MatmulQ4_1x16;
    t.matmul_q5_0_x16 = avxvnni::MatmulQ5_0x16;
    t.matmul_q5_1_x16 = avxvnni::MatmulQ5_1x16;
    t.matmul_iq4_nl_x16 = avxvnni::MatmulIq4Nlx16;
    t.matmul_mxfp4_x16 = avxvnni::MatmulMxfp4x16;
    t.matmul_q6_k_x16 = avxvnni::MatmulQ6_Kx16;
    t.decode_q4_k_x16_alt = avxvnni::MatmulQ4_Kx16TwoPass;
    t.decode_q5_k_x16_alt = avxvnni::MatmulQ5_Kx16TwoPass;
    t.decode_q6_k_x16_alt = avxvnni::MatmulQ6_Kx16TwoPass;
    t.decode_q8_0_x16_l2 = avxvnni::MatmulQ8_0x16L2;
    t.decode_q4_0_x16_l2 = avxvnni::MatmulQ4_0x16L2;
    t.decode_q4_1_x16_l2 = avxvnni::MatmulQ4_1x16L2;
    t.decode_q5_0_x16_l2 = avxvnni::MatmulQ5_0x16L2;
    t.decode_q5_1_x16_l2 = avxvnni::MatmulQ5_1x16L2;
    t.decode_iq4_nl_x16_l2 = avxvnni::MatmulIq4Nlx16L2;
    t.decode_mxfp4_x16_l2 = avxvnni::MatmulMxfp4x16L2;
    return t;
  }();
  return &table;
}

bool CpuSupportsAvx512() {
  __builtin_cpu_init();
  return CpuSupportsAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("avx512bf16");
}

const KernelTable* AmxKernels() {
  if (Avx512Kernels() == nullptr) return nullptr;
  static const KernelTable table = [] {
    KernelTable t = *Avx512Kernels();
    t.isa = "amx";
    t.matmul_q8_0_x16 = amx::MatmulQ8_0x16;
    t.matmul_q4_0_x16 = amx::MatmulQ4_0x16;
    return t;
  }();
  return &table;
}

// CPUID leaf 7 EDX bits 24 (AMX-TILE) and 25 (AMX-INT8); XCR0 bits 17 and 18 (the OS saves the
// tile configuration and data); then Linux's per-process permission for the tile data.
bool CpuSupportsAmx() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!CpuSupportsAvx512() || __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    if (((edx >> 24) & 3u) != 3u) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    asm("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if (((xcr0_low >> 17) & 3u) != 3u) return false;
    return amx::RequestTilePermission();
  }();
  return supported;
}

const KernelTable& KernelsFor(std::string_view want) {
  const IsaLevel cap = LevelOf(want);
  if (cap >= IsaLevel::kAmx && AmxKernels() && CpuSupportsAmx()) return *AmxKernels();
  if (cap >= IsaLevel::kAvx512 && Avx512Kernels() && CpuSupportsAvx512()) return *Avx512Kernels();
  if (cap >= IsaLevel::kAvxVnni && AvxVnniKernels() && CpuSupportsAvxVnni()) {
    return *AvxVnniKernels();
  }
  if (cap >= IsaLevel::kAvx2 && Avx2Kernels() && CpuSupportsAvx2()) return *Avx2Kernels();
  return ScalarKernels();
}

GgmlType ActivationTypeFor(GgmlType weight) {
  switch (weight) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4:
      return GgmlType::kQ8_0;
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
      return GgmlType::kQ8_1;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_K;
    default:
      return GgmlType::kF32;
  }
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
    case GgmlType::kQ4_1:
      return table.matmul_q4_1;
    case GgmlType::kQ5_0:
      return table.matmul_q5_0;
    case GgmlType::kQ5_1:
      return table.matmul_q5_1;
    case GgmlType::kIQ4_NL:
      return table.matmul_iq4_nl;
    case GgmlType::kMXFP4:
      return table.matmul_mxfp4;
    case GgmlType::kQ2_K:
      return table.matmul_q2_k;
    case GgmlType::kQ3_K:
      return table.matmul_q3_k;
    case GgmlType::kQ4_K:
      return table.matmul_q4_k;
    case GgmlType::kQ5_K:
      return table.matmul_q5_k;
    case GgmlType::kQ6_K:
      return table.matmul_q6_k;
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
    case GgmlType::kQ4_K:
      return table.matmul_q4_k_x16;
    case GgmlType::kQ5_K:
      return table.matmul_q5_k_x16;
    case GgmlType::kQ6_K:
      return table.matmul_q6_k_x16;
    case GgmlType::kQ4_1:
      return table.matmul_q4_1_x16;
    case GgmlType::kQ5_0:
      return table.matmul_q5_0_x16;
    case GgmlType::kQ5_1:
      return table.matmul_q5_1_x16;
    case GgmlType::kIQ4_NL:
      return table.matmul_iq4_nl_x16;
    case GgmlType::kMXFP4:
      return table.matmul_mxfp4_x16;
    case GgmlType::kF32:
      return table.matmul_f32_x16;
    case GgmlType::kF16:
      return table.matmul_f16_x16;
    case GgmlType::kBF16:
      return table.matmul_bf16_x16;
    default:
      return nullptr;
  }
}

MatmulTileFn DecodeAlternativeFor(const KernelTable& table, GgmlType type, bool packed) {
  switch (type) {
    case GgmlType::kF32:
      return packed ? table.decode_f32_x16_l2 : table.decode_f32_l2;
    case GgmlType::kF16:
      return packed ? table.decode_f16_x16_l2 : table.decode_f16_l2;
    case GgmlType::kBF16:
      return packed ? table.decode_bf16_x16_l2 : table.decode_bf16_l2;
    case GgmlType::kQ8_0:
      return table.decode_q8_0_x16_l2;
    case GgmlType::kQ4_0:
      return table.decode_q4_0_x16_l2;
    case GgmlType::kQ4_K:
      return table.decode_q4_k_x16_alt;
    case GgmlType::kQ5_K:
      return table.decode_q5_k_x16_alt;
    case GgmlType::kQ6_K:
      return table.decode_q6_k_x16_alt;
    case GgmlType::kQ4_1:
      return table.decode_q4_1_x16_l2;
    case GgmlType::kQ5_0:
      return table.decode_q5_0_x16_l2;
    case GgmlType::kQ5_1:
      return table.decode_q5_1_x16_l2;
    case GgmlType::kIQ4_NL:
      return table.decode_iq4_nl_x16_l2;
    case GgmlType::kMXFP4:
      return table.decode_mxfp4_x16_l2;
    default:
      return nullptr;
  }
}

}  // namespace kvserve
