// KvExp (attend_head.h) on 8 lanes, for the AVX2 translation units only (*_avx2.cc, compiled with
// the AVX2 + FMA flags). It is in an anonymous namespace: every includer gets its own internal
// copy, so no AVX2 code can be merged into another ISA's translation unit (see kernels_avx2.cc).
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "kv_exp_avx2.h is for the AVX2 translation units only"
#endif

#include <immintrin.h>

#include "kernels/cpu/attend_head.h"

namespace kvserve::avx2 {
namespace {

inline __m256 KvExp(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(kExpMax));
  const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_GE_OQ);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpC7);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

}  // namespace
}  // namespace kvserve::avx2
