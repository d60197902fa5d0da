// Small helpers of the AVX2-class x16 tiles (kquant_x16_avx2.h, blocks32_x16_avx2.h), in an
// anonymous namespace: each translation unit gets its own copy, compiled for its own ISA.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "x16_helpers_avx2.h is for the AVX2-class translation units only"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kvserve {
namespace {

constexpr int kHalfLanes = 8;  // weight rows per vector: half of a 16-row group
constexpr int kGroupRows = 16;

// v as rounded floats (no FMA contraction: the scalar tiles round every product).
inline __m256 Rounded(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

inline __m256i Bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

inline __m256i Load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Bit `pos` of every byte of h moved to bit 4 (the other bits are not cleared).
inline __m256i BitToFour(__m256i h, int pos) {
  if (pos < 4) return _mm256_slli_epi16(h, 4 - pos);
  if (pos > 4) return _mm256_srli_epi16(h, pos - 4);
  return h;
}

// The first `valid` (up to 8) lanes of v to y.
inline void StoreHalf(float* y, __m256 v, int valid) {
  if (valid >= kHalfLanes) {
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float tmp[kHalfLanes];
  _mm256_store_ps(tmp, v);
  for (int l = 0; l < valid; ++l) y[l] = tmp[l];
}

}  // namespace
}  // namespace kvserve
