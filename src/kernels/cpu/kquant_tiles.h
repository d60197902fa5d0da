// SIMD matmul tiles of the K-quant weight types Q2_K, Q3_K, Q4_K, Q5_K and Q6_K against Q8_K
// activations, one set per ISA (kquant_tiles_avx2.cc, kquant_tiles_avx512.cc), put in that ISA's
// KernelTable. They give the bits of the scalar tiles (quant_tiles_scalar.h) for every m and output
// range: the integer part of each super-block is exact (so its order cannot matter), and the float
// part is the scalar tile's expression, operation for operation:
//   block = float(isum) * (d_w * d_x);  block = block - float(msum) * (dmin_w * d_x) (with mins);
//   sum = sum + block, over the super-blocks in increasing order from sum = 0.
// Call them only through the table, on a CPU that has the ISA.
#pragma once

#include "kernels/cpu/kernels.h"

namespace kvserve {

// AVX2 (vpmaddubsw + vpmaddwd); the AVX-VNNI table uses these too.
// Q8_K activation rows (KernelTable::quantize_row_q8_k): the scalar encoder and its AVX2 (also
// the AVX-VNNI table's) and AVX-512 twins (same bits).
namespace scalar {
void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out);
}  // namespace scalar
namespace avx2 {
void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out);
}  // namespace avx2
namespace avx512 {
void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out);
}  // namespace avx512

namespace avx2 {
void MatmulQ2_K(const MatmulTile& t);
void MatmulQ3_K(const MatmulTile& t);
void MatmulQ4_K(const MatmulTile& t);
void MatmulQ5_K(const MatmulTile& t);
void MatmulQ6_K(const MatmulTile& t);
// x16 layout (packed_kquants.h; kquant_x16_avx2.cc). TwoPass: one activation row takes the
// two-pass tiles with software prefetch too (KernelTable::decode_q4_k_x16_alt).
void MatmulQ4_Kx16(const MatmulTile& t);
void MatmulQ5_Kx16(const MatmulTile& t);
void MatmulQ6_Kx16(const MatmulTile& t);
void MatmulQ4_Kx16TwoPass(const MatmulTile& t);
void MatmulQ5_Kx16TwoPass(const MatmulTile& t);
void MatmulQ6_Kx16TwoPass(const MatmulTile& t);
}  // namespace avx2

// AVX-VNNI on the x16 layout (kquant_x16_avxvnni.cc).
namespace avxvnni {
void MatmulQ4_Kx16(const MatmulTile& t);
void MatmulQ5_Kx16(const MatmulTile& t);
void MatmulQ6_Kx16(const MatmulTile& t);
void MatmulQ4_Kx16TwoPass(const MatmulTile& t);
void MatmulQ5_Kx16TwoPass(const MatmulTile& t);
void MatmulQ6_Kx16TwoPass(const MatmulTile& t);
}  // namespace avxvnni

// AVX-512 (vpmaddubsw + vpdpwssd).
namespace avx512 {
void MatmulQ2_K(const MatmulTile& t);
void MatmulQ3_K(const MatmulTile& t);
void MatmulQ4_K(const MatmulTile& t);
void MatmulQ5_K(const MatmulTile& t);
void MatmulQ6_K(const MatmulTile& t);
// The same on matrices in the x16 layout of packed_kquants.h (kquant_x16_avx512.cc; VNNI).
void MatmulQ4_Kx16(const MatmulTile& t);
void MatmulQ5_Kx16(const MatmulTile& t);
void MatmulQ6_Kx16(const MatmulTile& t);
// The x16 tiles without their software prefetches (the hardware prefetchers alone): same bits.
// On a Zen 4 VM, one thread, m = 1, weights from memory: Q4_K 288 -> 194 and Q6_K 358 -> 295
// cycles per row-super-block, Q5_K 509 -> 853 (bench/kquant_tile_bench.cc); the CPU backend times
// both (KernelTable::decode_q4_k_x16_alt, decode_tile_chooser.h).
void MatmulQ4_Kx16NoPrefetch(const MatmulTile& t);
void MatmulQ5_Kx16NoPrefetch(const MatmulTile& t);
void MatmulQ6_Kx16NoPrefetch(const MatmulTile& t);
}  // namespace avx512

}  // namespace kvserve
