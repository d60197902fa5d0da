// KvExp (attend_head.h) on 16 lanes, for the AVX-512 translation units only (*_avx512.cc, compiled
// with the AVX-512 flags). It is in an anonymous namespace: every includer gets its own internal
// copy, so no AVX-512 code can be merged into another ISA's translation unit (see
// kernels_avx512.cc).
#pragma once

#if !defined(__AVX512F__)
#error "kv_exp_avx512.h is for the AVX-512 translation units only"
#endif

#include "kernels/cpu/immintrin_avx512.h"

#include "kernels/cpu/attend_head.h"

namespace kvserve::avx512 {
namespace {

inline __m512 KvExp(__m512 x) {
  x = _mm512_min_ps(x, _mm512_set1_ps(kExpMax));
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_GE_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kExpLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kExpLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kExpLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpC7);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(live, p, _mm512_castsi512_ps(bits));
}

}  // namespace
}  // namespace kvserve::avx512
