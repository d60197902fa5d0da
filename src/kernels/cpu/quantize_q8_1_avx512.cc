// AVX-512 Q8_1 activation rows (Q4_1's and Q5_1's): the bits of the scalar encoder
// (ggml_encode::Q8_1), a 32-element block in two vectors. Per block:
//   amax = the largest |x| (NaN never counts); d = amax / 127; id = 127 / amax (0 when amax is 0);
//   q = nearbyint(x * id) clamped to [-127, 127], NaN -> 0; s = f16(d * Σ q), d stored as f16.
// Clamping before rounding gives the same integers as rounding before clamping (the bounds are
// integers), and the conversion rounds to nearest even as nearbyint does in the default mode. The
// two f16 conversions per block are the scalar FloatToFp16 itself (NaN and overflow included).
#include <cstdint>

#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/immintrin_avx512.h"
#include "util/half.h"

namespace kvserve::avx512 {

void QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 lo = _mm512_set1_ps(-127.0f);
  const __m512 hi = _mm512_set1_ps(127.0f);
  for (int b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    // max(a, b) returns b when a is NaN: a NaN element never becomes the maximum.
    __m512 amax = _mm512_max_ps(_mm512_and_ps(v0, abs_mask), _mm512_setzero_ps());
    amax = _mm512_max_ps(_mm512_and_ps(v1, abs_mask), amax);
    const float largest = _mm512_reduce_max_ps(amax);
    const float d = largest / 127.0f;
    const float id = largest != 0.0f ? 127.0f / largest : 0.0f;
    const __m512 scale = _mm512_set1_ps(id);
    __m512i q[2];
    const __m512 v[2] = {v0, v1};
    for (int h = 0; h < 2; ++h) {
      const __m512 p = _mm512_mul_ps(v[h], scale);
      const __mmask16 ordered = _mm512_cmp_ps_mask(p, p, _CMP_ORD_Q);
      q[h] = _mm512_maskz_cvtps_epi32(ordered, _mm512_min_ps(_mm512_max_ps(p, lo), hi));
    }
    // Straight into the output: a block assembled on the stack and copied out stalled every copy
    // on store forwarding (the 32-byte load over the 16- and 2-byte stores), 94% of this loop.
    BlockQ8_1& block = out[b];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block.quants), _mm512_cvtepi32_epi8(q[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block.quants + 16), _mm512_cvtepi32_epi8(q[1]));
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    block.d = FloatToFp16(d);
    block.s = FloatToFp16(d * static_cast<float>(sum));
  }
}

}  // namespace kvserve::avx512
