// AVX-512 Q8_K activation rows: the bits of the scalar encoder (ggml_encode::Q8_K), 16 lanes at a
// time. Per 256-element block:
//   max = the element of largest magnitude, the first one on ties (NaN never counts);
//   iscale = -127 / max; q = nearbyint(iscale * x) clamped to [-128, 127], NaN -> 0;
//   d = 1 / iscale; bsums[s] = the sum of q over elements 16s .. 16s + 15.
// Clamping before rounding gives the same integers as rounding before clamping (the bounds are
// integers), and the conversion rounds to nearest even as nearbyint does in the default mode.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kquant_tiles.h"

namespace kvserve::avx512 {

namespace {

constexpr int kBlock = 256;
constexpr int kVectors = kBlock / 16;

// The first element of `x` (one block) whose magnitude is the block's largest; 0 when all are 0.
float SignedMaxMagnitude(const float* x) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 amax = _mm512_setzero_ps();
  for (int v = 0; v < kVectors; ++v) {
    // max(a, b) returns b when a is NaN: a NaN element never becomes the maximum.
    amax = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + 16 * v), abs_mask), amax);
  }
  const float largest = _mm512_reduce_max_ps(amax);
  if (!(largest > 0.0f)) return 0.0f;
  const __m512 target = _mm512_set1_ps(largest);
  for (int v = 0; v < kVectors; ++v) {
    const __m512 a = _mm512_and_ps(_mm512_loadu_ps(x + 16 * v), abs_mask);
    const __mmask16 hit = _mm512_cmp_ps_mask(a, target, _CMP_EQ_OQ);
    if (hit != 0) return x[16 * v + __builtin_ctz(hit)];
  }
  return 0.0f;  // not reached: some element equals the maximum
}

}  // namespace

void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out) {
  const __m512 lo = _mm512_set1_ps(-128.0f);
  const __m512 hi = _mm512_set1_ps(127.0f);
  for (int b = 0; b < k / kBlock; ++b) {
    const float* v = x + static_cast<size_t>(b) * kBlock;
    // Written in place: a block built on the stack and copied out stalls the copy's loads on store
    // forwarding (quantize_q8_1_avx512.cc).
    BlockQ8_K& block = out[b];
    const float max = SignedMaxMagnitude(v);
    if (max == 0.0f) {
      std::memset(&block, 0, sizeof(block));
    } else {
      const float iscale = -127.0f / max;
      const __m512 scale = _mm512_set1_ps(iscale);
      for (int i = 0; i < kVectors; ++i) {
        const __m512 p = _mm512_mul_ps(scale, _mm512_loadu_ps(v + 16 * i));
        const __mmask16 ordered = _mm512_cmp_ps_mask(p, p, _CMP_ORD_Q);
        const __m512 clamped = _mm512_min_ps(_mm512_max_ps(p, lo), hi);
        const __m512i q = _mm512_maskz_cvtps_epi32(ordered, clamped);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(block.quants + 16 * i),
                         _mm512_cvtepi32_epi8(q));
        block.bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
      }
      block.d = 1.0f / iscale;
    }
  }
}

}  // namespace kvserve::avx512
