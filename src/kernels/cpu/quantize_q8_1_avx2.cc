// AVX2 Q8_1 activation rows (Q4_1's and Q5_1's): the bits of the scalar encoder
// (ggml_encode::Q8_1), a 32-element block in four vectors; the same steps as
// quantize_q8_1_avx512.cc (the largest |x|, NaN never counts; d = amax / 127, id = 127 / amax or 0;
// q = nearbyint(x * id) clamped to [-127, 127], NaN -> 0; s = f16(d * Σ q) by FloatToFp16).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/blocks32_tiles.h"
#include "util/half.h"

namespace kvserve::avx2 {

namespace {

float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.0f);
  const __m256 hi = _mm256_set1_ps(127.0f);
  for (int b = 0; b < k / 32; ++b) {
    const float* v = x + 32 * b;
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      // max(a, b) returns b when a is NaN: a NaN element never becomes the maximum.
      amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + 8 * i), abs_mask), amax);
    }
    const float largest = HorizontalMax(amax);
    const float d = largest / 127.0f;
    const float id = largest != 0.0f ? 127.0f / largest : 0.0f;
    const __m256 scale = _mm256_set1_ps(id);
    BlockQ8_1& block =
        out[b];  // written in place (no copy through the stack: quantize_q8_1_avx512.cc)
    __m256i sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(v + 8 * i), scale);
      const __m256 ordered = _mm256_cmp_ps(p, p, _CMP_ORD_Q);
      const __m256 clamped = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(p, lo), hi), ordered);
      const __m256i q = _mm256_cvtps_epi32(clamped);  // NaN lanes are +0 here
      sum = _mm256_add_epi32(sum, q);
      const __m128i q16 =
          _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      const __m128i q8 = _mm_packs_epi16(q16, q16);
      std::memcpy(block.quants + 8 * i, &q8, 8);
    }
    block.d = FloatToFp16(d);
    block.s = FloatToFp16(d * static_cast<float>(HorizontalSum(sum)));
  }
}

}  // namespace kvserve::avx2
