// The block-quantized matmul tiles (Q8_0 and Q4_0 weights against Q8_0 activations), one set per
// ISA, each defined in its own translation unit (quant_matmul_avx2.cc, quant_matmul_avxvnni.cc,
// quant_matmul_avx512.cc) and put in that ISA's KernelTable. Call them only through the table, on a
// CPU that has the ISA.
#pragma once

#include "kernels/cpu/kernels.h"

namespace kvserve {

namespace avx2 {
void MatmulQ8_0(const MatmulTile& t);
void MatmulQ4_0(const MatmulTile& t);
// The same on matrices in the x16 layout of packed_weights.h. All four compute what the AVX-512
// tiles compute, bit for bit.
void MatmulQ8_0x16(const MatmulTile& t);
void MatmulQ4_0x16(const MatmulTile& t);
// The x16 tiles with their decode prefetches into L2 (prefetch_ahead.h): same bits.
void MatmulQ8_0x16L2(const MatmulTile& t);
void MatmulQ4_0x16L2(const MatmulTile& t);
}  // namespace avx2

// AVX2 + AVX-VNNI (256-bit vpdpbusd): the same four, same bits.
namespace avxvnni {
void MatmulQ8_0(const MatmulTile& t);
void MatmulQ4_0(const MatmulTile& t);
void MatmulQ8_0x16(const MatmulTile& t);
void MatmulQ4_0x16(const MatmulTile& t);
void MatmulQ8_0x16L2(const MatmulTile& t);
void MatmulQ4_0x16L2(const MatmulTile& t);
}  // namespace avxvnni

namespace avx512 {
void MatmulQ8_0(const MatmulTile& t);
void MatmulQ4_0(const MatmulTile& t);
// The same on matrices in the x16 layout of packed_weights.h.
void MatmulQ8_0x16(const MatmulTile& t);
void MatmulQ4_0x16(const MatmulTile& t);
// The x16 tiles with their decode prefetches (one activation row) into L2 instead of L1
// (prefetch_ahead.h): same bits, another memory access pattern.
void MatmulQ8_0x16L2(const MatmulTile& t);
void MatmulQ4_0x16L2(const MatmulTile& t);
}  // namespace avx512

namespace amx {
// Asks Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM); false where it refuses.
bool RequestTilePermission();
// The x16 tiles on AMX-INT8 for 16 activation rows at a time (prompts); fewer rows, and the rows
// past the last multiple of 16, on avx512's. Same bits as avx512's.
void MatmulQ8_0x16(const MatmulTile& t);
void MatmulQ4_0x16(const MatmulTile& t);
}  // namespace amx

}  // namespace kvserve
