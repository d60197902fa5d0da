// Small helpers of the AVX-512 x16 tiles (kquant_x16_avx512.cc, blocks32_x16_avx512.cc,
// quant_matmul_avx512.cc), in an anonymous namespace: each translation unit gets its own copy,
// compiled for AVX-512.
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__)
#error "x16_helpers_avx512.h is for the AVX-512 translation units only"
#endif

#include <cstdint>

#include "kernels/cpu/immintrin_avx512.h"

namespace kvserve::avx512 {
namespace {

constexpr int kX16Lanes = 16;  // weight rows per vector: one 16-row group

// v as rounded floats: C++ compiles with -ffp-contract=fast, and GCC would fuse a product and a
// sum into an FMA where the scalar tiles round the product.
inline __m512 Rounded(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// vpdpbusd / vpdpwssd of w against the dword at p broadcast, the broadcast folded into the
// instruction's memory operand ({1to16}), which GCC does not do for these intrinsics: one
// instruction where vpbroadcastd + vpdpbusd were two (the x16 Q4_K tile at m = 8, weights from
// memory: 69.4 → 58.5 cycles per row-super-block). AT&T syntax (GCC's and Clang's default); p needs
// no alignment.
inline __m512i DpbusdBcast(__m512i acc, __m512i w, const void* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}
inline __m512i DpwssdBcast(__m512i acc, __m512i w, const void* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// The lanes of rows j0 .. n_end - 1 of a group.
inline __mmask16 StoreMask(int j0, int n_end) {
  const int valid = n_end - j0;
  return valid >= kX16Lanes ? static_cast<__mmask16>(0xffff)
                            : static_cast<__mmask16>((1u << valid) - 1u);
}

// Bit `pos` of every byte of h moved to bit 4 (the other bits are not cleared).
inline __m512i BitToFour(__m512i h, int pos) {
  if (pos < 4) return _mm512_slli_epi16(h, static_cast<unsigned>(4 - pos));
  if (pos > 4) return _mm512_srli_epi16(h, static_cast<unsigned>(pos - 4));
  return h;
}

}  // namespace
}  // namespace kvserve::avx512
