// The scalar matmul tiles of the GGML weight types beyond Q8_0/Q4_0 (quant_tiles_scalar.cc). Every
// table (scalar, AVX2, AVX-VNNI, AVX-512) uses these same functions for now, so all give the same
// bits; SIMD twins are a later step. X rows are in the type's activation format
// (ActivationTypeFor in kernels.h): Q8_0 for Q5_0, IQ4_NL and MXFP4, Q8_1 for Q4_1 and Q5_1, Q8_K
// for the K-quants.
//
// Arithmetic, for every output element: per 32-block (Q4_1 .. MXFP4) or 256-super-block
// (K-quants), an exact integer dot of the weight's small integers with the activation's int8s
// (K-quants: per sub-block, times its integer scale, summed over the sub-blocks in order), then
// sum += isum * (d_w * d_x) (+ m_w * s_x for Q4_1/Q5_1; - (dmin_w * d_x) * Σ_s min_s * bsum_s for
// Q2_K/Q4_K/Q5_K), in float32, over the blocks in increasing order from 0.
#pragma once

#include "kernels/cpu/kernels.h"

namespace kvserve::scalar {

void MatmulQ4_1(const MatmulTile& t);
void MatmulQ5_0(const MatmulTile& t);
void MatmulQ5_1(const MatmulTile& t);
void MatmulIq4Nl(const MatmulTile& t);
void MatmulMxfp4(const MatmulTile& t);
void MatmulQ2_K(const MatmulTile& t);
void MatmulQ3_K(const MatmulTile& t);
void MatmulQ4_K(const MatmulTile& t);
void MatmulQ5_K(const MatmulTile& t);
void MatmulQ6_K(const MatmulTile& t);

}  // namespace kvserve::scalar
