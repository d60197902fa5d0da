// AVX2 activation rows, 8 lanes at a time, the bits of the scalar encoders:
// - Q8_K (ggml_encode::Q8_K), the same steps as quantize_q8k_avx512.cc (the first largest
//   magnitude, NaN never counts; q = nearbyint(iscale * x) clamped to [-128, 127], NaN -> 0;
//   d = 1 / iscale; bsums);
// - Q8_1 (ggml_encode::Q8_1), the same steps as quantize_q8_1_avx512.cc (the largest |x|, NaN never
//   counts; d = amax / 127, id = 127 / amax or 0; q = nearbyint(x * id) clamped to [-127, 127],
//   NaN -> 0; s = f16(d * Σ q) by FloatToFp16).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/kquant_tiles.h"
#include "util/half.h"

namespace kvserve::avx2 {

namespace {

constexpr int kBlock = 256;
constexpr int kVectors = kBlock / 8;

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

float SignedMaxMagnitude(const float* x) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amax = _mm256_setzero_ps();
  for (int v = 0; v < kVectors; ++v) {
    // max(a, b) returns b when a is NaN: a NaN element never becomes the maximum.
    amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * v), abs_mask), amax);
  }
  const float largest = HorizontalMax(amax);
  if (!(largest > 0.0f)) return 0.0f;
  const __m256 target = _mm256_set1_ps(largest);
  for (int v = 0; v < kVectors; ++v) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * v), abs_mask);
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, target, _CMP_EQ_OQ));
    if (hit != 0) return x[8 * v + __builtin_ctz(static_cast<unsigned>(hit))];
  }
  return 0.0f;  // not reached: some element equals the maximum
}

// Eight lanes of iscale * x rounded and clamped, NaN -> 0, as int32.
__m256i Quantize8(__m256 scale, const float* x) {
  const __m256 p = _mm256_mul_ps(scale, _mm256_loadu_ps(x));
  const __m256 ordered = _mm256_cmp_ps(p, p, _CMP_ORD_Q);
  const __m256 clamped =
      _mm256_min_ps(_mm256_max_ps(p, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
  return _mm256_and_si256(_mm256_cvtps_epi32(clamped), _mm256_castps_si256(ordered));
}

}  // namespace

void QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out) {
  // packs work per 128-bit lane: this puts the 32 bytes back in element order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
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
      const __m256 scale = _mm256_set1_ps(iscale);
      for (int i = 0; i < kBlock / 32; ++i) {
        const __m256i q0 = Quantize8(scale, v + 32 * i);
        const __m256i q1 = Quantize8(scale, v + 32 * i + 8);
        const __m256i q2 = Quantize8(scale, v + 32 * i + 16);
        const __m256i q3 = Quantize8(scale, v + 32 * i + 24);
        const __m256i bytes = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3)), order);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.quants + 32 * i), bytes);
        block.bsums[2 * i] = static_cast<int16_t>(HorizontalSum(_mm256_add_epi32(q0, q1)));
        block.bsums[2 * i + 1] = static_cast<int16_t>(HorizontalSum(_mm256_add_epi32(q2, q3)));
      }
      block.d = 1.0f / iscale;
    }
  }
}

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
