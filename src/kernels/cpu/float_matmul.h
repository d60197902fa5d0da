// The float-weight matmul tiles (F32, F16 and BF16 weights against float32 activations) of the
// AVX-512 table, defined in float_matmul_avx512.cc. Call them only through the table, on a CPU that
// has the ISA. (The scalar and AVX2 ones are still in kernels_scalar.cc and kernels_avx2.cc.)
#pragma once

#include "kernels/cpu/kernels.h"

namespace kvserve::avx512 {

// The prefill path (16 activation rows or more) walks k in blocks of this many elements, spilling
// its accumulators between blocks (tests use longer rows to cover the spills).
inline constexpr int kPanelKBlockFloats = 4096;

void MatmulF32(const MatmulTile& t);
void MatmulF16(const MatmulTile& t);
void MatmulBf16(const MatmulTile& t);
// The same with the decode tile's prefetches (one activation row) into L2 instead of L1
// (prefetch_ahead.h): same bits, another memory access pattern.
void MatmulF32L2(const MatmulTile& t);
void MatmulF16L2(const MatmulTile& t);
void MatmulBf16L2(const MatmulTile& t);
// The same on matrices in the x16 layout (packed_floats.h; w_row_bytes: one 16-row group's bytes,
// n_begin a multiple of 16); the L2 forms' decode tile also prefetches its stream into L2.
void MatmulF32X16(const MatmulTile& t);
void MatmulF16X16(const MatmulTile& t);
void MatmulBf16X16(const MatmulTile& t);
void MatmulF32X16L2(const MatmulTile& t);
void MatmulF16X16L2(const MatmulTile& t);
void MatmulBf16X16L2(const MatmulTile& t);

}  // namespace kvserve::avx512
