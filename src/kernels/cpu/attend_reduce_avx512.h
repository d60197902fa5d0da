// The reductions of the AVX-512 attend_head kernels (attend_head_avx512.cc and
// attend_head_quant_avx512.cc): lane masks, HSum's halving tree on one vector and transposed over
// 16 keys, and the exp pass. For the AVX-512 translation units only; in an anonymous namespace, so
// every includer gets its own internal copy (see kernels_avx512.cc on why).
#pragma once

#if !defined(__AVX512F__)
#error "attend_reduce_avx512.h is for the AVX-512 translation units only"
#endif

#include "kernels/cpu/immintrin_avx512.h"

#include <cmath>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/kv_exp_avx512.h"

namespace kvserve::avx512 {
namespace {

constexpr int kReduceLanes = 16;

inline __mmask16 LaneMask(int n) {
  return n >= kReduceLanes ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// a[i] for i < 16 are 16 accumulators; returns v with v[i] = HSum(a[i]) (the same tree).
inline __m512 TransposedHalvingSum(const __m512 a[kReduceLanes]) {
  __m512 s8[8];  // s8[p]: lanes 0-7 key 2p, lanes 8-15 key 2p + 1 (8 partial sums each)
  for (int p = 0; p < 8; ++p) {
    const __m512 x = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s8[p] = _mm512_add_ps(x, y);
  }
  __m512 s4[4];  // s4[p]: 128-bit chunk c holds key 4p + c (4 partial sums)
  for (int p = 0; p < 4; ++p) {
    const __m512 x = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 y = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1));
    s4[p] = _mm512_add_ps(x, y);
  }
  __m512 s2[2];  // s2[p]: chunk c holds keys 8p + c (lanes 0-1) and 8p + 4 + c (lanes 2-3)
  for (int p = 0; p < 2; ++p) {
    const __m512 x = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s2[p] = _mm512_add_ps(x, y);
  }
  // Chunk c, lane i: key c + 4 i.
  const __m512 x = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 y = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1));
  const __m512 s1 = _mm512_add_ps(x, y);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, s1);
}

inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// job.scores[p] = KvExp(score - max); returns the 16-lane sum reduced by HSum's tree.
inline float ExpScores(const AttendJob& job, float max_score) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const __m512 max = _mm512_set1_ps(max_score);
  __m512 sums = _mm512_setzero_ps();
  for (int p0 = 0; p0 < count; p0 += kReduceLanes) {
    const __mmask16 live = LaneMask(count - p0);
    const __m512 e = KvExp(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, job.scores + p0), max));
    _mm512_mask_storeu_ps(job.scores + p0, live, e);
    sums = _mm512_mask_add_ps(sums, live, sums, e);
  }
  return HSum(sums);
}

// The softmax's 1 / sum over the raw scores' maximum: AdjustScores (bias, soft-cap), the sink into
// the max, the exp pass (job.scores[p] = KvExp(score - max)) and the sink's own term.
inline float SoftmaxInverseSum(const AttendJob& job, float raw_max) {
  float max_score = scalar::AdjustScores(job, raw_max);
  max_score = std::fmax(max_score, job.sink);
  return 1.0f / (ExpScores(job, max_score) + scalar::KvExp(job.sink - max_score));
}

}  // namespace
}  // namespace kvserve::avx512
