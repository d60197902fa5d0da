// SIMD matmul tiles of Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 matrices in the x16 layout of
// packed_blocks32.h, one set per ISA (blocks32_x16_avx512.cc, blocks32_x16_avx2.cc,
// blocks32_x16_avxvnni.cc), put in that ISA's KernelTable. They give the bits of the scalar tiles
// for every m and 16-aligned output range; with them the Q8_1 activation quantizers of Q4_1 and
// Q5_1 (the scalar encoder's bits). Call them only through the table, on a CPU that has the ISA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kernels.h"

namespace kvserve {

// sums[i * n_blocks + b] = Σ of the 32 quants of block b of activation row i (rows x_row_bytes
// apart, blocks block_bytes apart, quants at quants_offset in a block).
inline void ActivationBlockSums(const uint8_t* x, size_t x_row_bytes, size_t block_bytes,
                                size_t quants_offset, int m, int n_blocks, int32_t* sums) {
  for (int i = 0; i < m; ++i) {
    for (int b = 0; b < n_blocks; ++b) {
      const int8_t* q = reinterpret_cast<const int8_t*>(x + static_cast<size_t>(i) * x_row_bytes +
                                                        block_bytes * b + quants_offset);
      int32_t s = 0;
      for (int e = 0; e < 32; ++e) s += q[e];
      sums[static_cast<size_t>(i) * n_blocks + b] = s;
    }
  }
}

namespace scalar {  // kernels_scalar.cc: ggml_encode::Q8_1
void QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out);
}  // namespace scalar

namespace avx2 {  // blocks32_x16_avx2.cc; QuantizeRowQ8_1: quantize_rows_avx2.cc
void QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out);
void MatmulQ4_1x16(const MatmulTile& t);
void MatmulQ5_0x16(const MatmulTile& t);
void MatmulQ5_1x16(const MatmulTile& t);
void MatmulIq4Nlx16(const MatmulTile& t);
void MatmulMxfp4x16(const MatmulTile& t);
// The same with their decode prefetches into L2 (prefetch_ahead.h): same bits.
void MatmulQ4_1x16L2(const MatmulTile& t);
void MatmulQ5_0x16L2(const MatmulTile& t);
void MatmulQ5_1x16L2(const MatmulTile& t);
void MatmulIq4Nlx16L2(const MatmulTile& t);
void MatmulMxfp4x16L2(const MatmulTile& t);
}  // namespace avx2

namespace avxvnni {  // blocks32_x16_avxvnni.cc
void MatmulQ4_1x16(const MatmulTile& t);
void MatmulQ5_0x16(const MatmulTile& t);
void MatmulQ5_1x16(const MatmulTile& t);
void MatmulIq4Nlx16(const MatmulTile& t);
void MatmulMxfp4x16(const MatmulTile& t);
// The same with their decode prefetches into L2 (prefetch_ahead.h): same bits.
void MatmulQ4_1x16L2(const MatmulTile& t);
void MatmulQ5_0x16L2(const MatmulTile& t);
void MatmulQ5_1x16L2(const MatmulTile& t);
void MatmulIq4Nlx16L2(const MatmulTile& t);
void MatmulMxfp4x16L2(const MatmulTile& t);
}  // namespace avxvnni

namespace avx512 {  // blocks32_x16_avx512.cc; QuantizeRowQ8_1: quantize_q8_1_avx512.cc
void QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out);
void MatmulQ4_1x16(const MatmulTile& t);
void MatmulQ5_0x16(const MatmulTile& t);
void MatmulQ5_1x16(const MatmulTile& t);
void MatmulIq4Nlx16(const MatmulTile& t);
void MatmulMxfp4x16(const MatmulTile& t);
// The same with their decode prefetches (one activation row) into L2 instead of L1
// (prefetch_ahead.h): same bits, another memory access pattern.
void MatmulQ4_1x16L2(const MatmulTile& t);
void MatmulQ5_0x16L2(const MatmulTile& t);
void MatmulQ5_1x16L2(const MatmulTile& t);
void MatmulIq4Nlx16L2(const MatmulTile& t);
void MatmulMxfp4x16L2(const MatmulTile& t);
}  // namespace avx512

}  // namespace kvserve
