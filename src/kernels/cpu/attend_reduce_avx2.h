// The reductions of the AVX2 attend_head kernels (attend_head_avx2.cc and
// attend_head_quant_avx2.cc): lane masks, the padded row's tail chunks, HSum's halving tree on a
// 16-lane accumulator held as two halves and transposed over 8 keys, and the exp pass. For the
// AVX2 translation units only; in an anonymous namespace, so every includer gets its own internal
// copy (see kernels_avx512.cc on why).
#pragma once

#if !defined(__AVX2__)
#error "attend_reduce_avx2.h is for the AVX2 translation units only"
#endif

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/kv_exp_avx2.h"

namespace kvserve::avx2 {
namespace {

constexpr int kLanes = 8;        // floats in a __m256
constexpr int kAccLanes = 16;    // lanes of the contract's accumulators: two __m256 halves
constexpr int kKeysPerStep = 8;  // scores reduced together by TransposedHalvingSum

// Lanes [0, n) all ones, the rest zero (n may be anything; n >= 8 selects all).
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Elements of head_dim in the last two 8-lane chunks of a kVec * 16 padded row: lo in chunk
// 2 kVec - 2, hi in chunk 2 kVec - 1 (every earlier chunk is full).
struct Tail {
  int lo;
  int hi;
};

template <int kVec>
inline int ChunkLength(int chunk, Tail tail) {
  if (chunk < 2 * kVec - 2) return kLanes;
  return chunk == 2 * kVec - 2 ? tail.lo : tail.hi;
}

// a[i] (i < 8) holds key i's 16-lane accumulator after HSum's first step (lanes l + 8 added);
// returns v with v[i] = the rest of HSum's tree on a[i]: lanes l + 4, then l + 2, then l + 1.
inline __m256 TransposedHalvingSum(const __m256 a[kKeysPerStep]) {
  __m256 s4[4];  // s4[p]: lanes 0-3 key 2p, lanes 4-7 key 2p + 1 (4 partial sums each)
  for (int p = 0; p < 4; ++p) {
    const __m256 x = _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x20);
    const __m256 y = _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x31);
    s4[p] = _mm256_add_ps(x, y);
  }
  // s2[p], 128-bit half h: lanes 0-1 key 4p + h, lanes 2-3 key 4p + 2 + h (2 partial sums each).
  __m256 s2[2];
  for (int p = 0; p < 2; ++p) {
    const __m256 x = _mm256_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 y = _mm256_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s2[p] = _mm256_add_ps(x, y);
  }
  // Half h, lane i: key h + 2 i.
  const __m256 x = _mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 y = _mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 s1 = _mm256_add_ps(x, y);
  return _mm256_permutevar8x32_ps(s1, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// HSum's tree on a 16-lane accumulator given as its halves.
inline float HalvingSum(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline float MaxLane(__m256 v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// job.scores[p] = KvExp(score - max); returns their 16-lane sum (lane p mod 16) reduced by HSum's
// tree.
inline float ExpScores(const AttendJob& job, float max_score) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const __m256 max = _mm256_set1_ps(max_score);
  __m256 sums[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // lanes 0-7, lanes 8-15
  for (int p0 = 0; p0 < count; p0 += kAccLanes) {
    for (int half = 0; half < 2; ++half) {
      float* at = job.scores + p0 + kLanes * half;
      const __m256i live = LaneMask(count - p0 - kLanes * half);
      const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(live),
                                     KvExp(_mm256_sub_ps(_mm256_maskload_ps(at, live), max)));
      _mm256_maskstore_ps(at, live, e);
      sums[half] = _mm256_add_ps(sums[half], e);  // + 0 in the lanes past n_keys: no change
    }
  }
  return HalvingSum(sums[0], sums[1]);
}

// The softmax's 1 / sum over the raw scores' maximum: AdjustScores (bias, soft-cap), the sink into
// the max, the exp pass (job.scores[p] = KvExp(score - max)) and the sink's own term.
inline float SoftmaxInverseSum(const AttendJob& job, float raw_max) {
  float max_score = scalar::AdjustScores(job, raw_max);
  max_score = std::fmax(max_score, job.sink);
  return 1.0f / (ExpScores(job, max_score) + scalar::KvExp(job.sink - max_score));
}

}  // namespace
}  // namespace kvserve::avx2
