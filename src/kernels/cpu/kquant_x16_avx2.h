// The x16 Q4_K, Q5_K and Q6_K tiles of the AVX2-class tables (packed_kquants.h layout, Q8_K
// activations): included by kquant_x16_avx2.cc (AVX2: vpmaddubsw) and kquant_x16_avxvnni.cc (AVX2 +
// AVX-VNNI: vpdpbusd on 256 bits), and by nothing else; everything is in an anonymous namespace so
// each translation unit gets its own copy compiled for its own instruction set.
//
// The arithmetic is the AVX-512 tiles' (kquant_x16_avx512.cc) with 8 rows per vector, half h of a
// 16-row group (rows 8h .. 8h + 7, bytes 32h .. 32h + 31 of every 64-byte dword vector): exact
// integer sub-block dots weighed by the lane's scales, the offset or min term from the bsums, and
// the scalar tile's float expression per lane, so every table gives the scalar tile's bits.
// Exact integer dots without VNNI: vpmaddubsw's int16 pairs cannot saturate here. Q4_K: nibbles
// 0 .. 15, a pair at most 2 * 15 * 128 = 3840, so a sub-block's 8 dwords add up in int16 (<= 30720)
// before one vpmaddwd widens them; Q6_K: values 0 .. 63, a pair at most 16128, two dwords at a
// time.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kquant_x16_avx2.h is for the AVX2-class translation units only"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_kquants.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/x16_helpers_avx2.h"

namespace kvserve {
namespace {

#if defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

// Activation rows that visit each super-block of a group in one pass, both halves and kMr rows at
// a time: the group's weights stream in from memory once per kPassRows rows, and the later
// chunks and the second half find the super-block in L1.
constexpr int kPassRows = 16;
// Activation rows per chunk: the weights are unpacked once per chunk. 8 spills more of AVX2's 16
// registers than 4 did, and still gained (Zen 4 VM, KVSERVE_ISA=avx2, pp128, 2 threads,
// alternating: tinyllama Q4_K_M 133-137 -> 146-161 t/s, Q6_K 109-118 -> 133-138; 16 rows level
// with 8, 2 and 3 slower than 4).
constexpr int kMr = 8;
// Bytes ahead of the weight vector being read that are prefetched into L1 (as the AVX-512 tiles).
constexpr int kPrefetchAhead = 12288;

// 8 bytes at p widened to int32 lanes (unsigned or signed).
inline __m256i LoadU8x8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i LoadI8x8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 LoadF16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Σ over dwords i < N of the lane's 4 unsigned weight bytes w[i] times the activation dword at
// xq + 4i, exact, in int32 lanes. kPerWiden: dwords whose int16 pairs can be added before they
// are widened (weights below 16: 8; below 32: 4; below 64: 2).
template <int N, int kPerWiden>
inline __m256i DotDwords(const __m256i* w, const int8_t* xq) {
  if constexpr (kVnni) {
    __m256i s = _mm256_setzero_si256();
    for (int i = 0; i < N; ++i) s = _mm256_dpbusd_avx_epi32(s, w[i], Bcast32(xq + 4 * i));
    return s;
  } else {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i total = _mm256_setzero_si256();
    for (int i0 = 0; i0 < N; i0 += kPerWiden) {
      __m256i pairs = _mm256_maddubs_epi16(w[i0], Bcast32(xq + 4 * i0));
      for (int i = i0 + 1; i < i0 + kPerWiden; ++i) {
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[i], Bcast32(xq + 4 * i)));
      }
      total = _mm256_add_epi32(total, _mm256_madd_epi16(pairs, ones));
    }
    return total;
  }
}

// acc + Σ_k pairs[k] · (the int16 pair at p + 4k), exact (vpmaddwd / vpdpwssd).
inline __m256i DotPairs(__m256i acc, const __m256i* pairs, int n, const uint8_t* p) {
  for (int k = 0; k < n; ++k) {
    if constexpr (kVnni) {
      acc = _mm256_dpwssd_avx_epi32(acc, pairs[k], Bcast32(p + 4 * k));
    } else {
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs[k], Bcast32(p + 4 * k)));
    }
  }
  return acc;
}

inline const int8_t* Quants(const uint8_t* x_row, int b) {
  return reinterpret_cast<const int8_t*>(x_row + sizeof(BlockQ8_K) * b +
                                         offsetof(BlockQ8_K, quants));
}
inline const uint8_t* Bsums(const uint8_t* x_row, int b) {
  return x_row + sizeof(BlockQ8_K) * b + offsetof(BlockQ8_K, bsums);
}
inline float Dx(const uint8_t* x_row, int b) {
  float d;
  std::memcpy(&d, x_row + sizeof(BlockQ8_K) * b + offsetof(BlockQ8_K, d), sizeof(d));
  return d;
}

// acc[r] (the 8 lanes of half h) += super-block sb's sum for rows x[0 .. MR) (block b of each).
template <bool kQ5, int MR>
void K4SuperBlockHalf(const uint8_t* sb, int b, int h, const uint8_t* const* x, bool prefetch,
                      float (*acc)[kHalfLanes]) {
  const uint8_t* side = sb;
  const uint8_t* quants = sb + kKSideBytes;
  const uint8_t* quant = quants + 32 * h;
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i four = _mm256_set1_epi8(0x10);
  if (prefetch && MR <= kSidePrefetchRows) {
    PrefetchLinesAhead(side, kQ4KSidePart);
    if constexpr (kQ5) PrefetchLinesAhead(quants + kQ5KQh, kQ5KQuantPart - kQ5KQh);
  }
  __m256i isum[MR];
  for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
  for (int s = 0; s < 8; ++s) {  // sub-block s: the low (s even) or high nibbles of pair s / 2
    const int p = s / 2;
    __m256i w[8];
    for (int i = 0; i < 8; ++i) {
      const uint8_t* v = quants + 64 * (8 * p + i);
      if (s % 2 == 0 && prefetch) {
        _mm_prefetch(reinterpret_cast<const char*>(v + kPrefetchAhead), _MM_HINT_T0);
      }
      const __m256i g = Load(v + 32 * h);
      w[i] = _mm256_and_si256(s % 2 == 0 ? g : _mm256_srli_epi16(g, 4), low);
      if constexpr (kQ5) {
        const __m256i qh = Load(quant + kQ5KQh + 64 * i);
        w[i] = _mm256_or_si256(w[i], _mm256_and_si256(BitToFour(qh, s), four));
      }
    }
    const __m256i sc = LoadU8x8(side + kQ4KScales + 16 * s + 8 * h);
    for (int r = 0; r < MR; ++r) {
      const __m256i dot = DotDwords < 8, kQ5 ? 4 : 8 > (w, Quants(x[r], b) + 64 * p + 32 * (s % 2));
      isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(dot, sc));
    }
  }
  __m256i min_pairs[8];
  for (int s = 0; s < 8; ++s) {
    const __m256i m = LoadU8x8(side + kQ4KMins + 16 * s + 8 * h);
    min_pairs[s] = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
  }
  const __m256 d = LoadF16x8(side + kQ4KD + 16 * h);
  const __m256 dmin = LoadF16x8(side + kQ4KDmin + 16 * h);
  for (int r = 0; r < MR; ++r) {
    const __m256i msum = DotPairs(_mm256_setzero_si256(), min_pairs, 8, Bsums(x[r], b));
    const __m256 dx = _mm256_set1_ps(Dx(x[r], b));
    __m256 block =
        Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(isum[r]), Rounded(_mm256_mul_ps(d, dx))));
    block = Rounded(_mm256_sub_ps(
        block, Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(msum), Rounded(_mm256_mul_ps(dmin, dx))))));
    _mm256_store_ps(acc[r], Rounded(_mm256_add_ps(_mm256_load_ps(acc[r]), block)));
  }
}

// acc[r] (the 8 lanes of half h) += super-block sb's sum for rows x[0 .. MR) (block b of each).
template <int MR>
void Q6KSuperBlockHalf(const uint8_t* sb, int b, int h, const uint8_t* const* x, bool prefetch,
                       float (*acc)[kHalfLanes]) {
  const uint8_t* side = sb;
  const uint8_t* quants = sb + kKSideBytes;
  if (prefetch && MR <= kSidePrefetchRows) PrefetchLinesAhead(side, kQ6KSidePart);
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i two = _mm256_set1_epi8(0x30);
  __m256i isum[MR];
  for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
  for (int n = 0; n < 2; ++n) {
    for (int q = 0; q < 2; ++q) {
      for (int k = 0; k < 4; ++k) {  // elements 128n + 32k + 16q + [0, 16): sub 8n + 2k + q
        __m256i e[4];
        for (int ii = 0; ii < 4; ++ii) {
          const uint8_t* v = quants + 3 * 64 * (8 * n + 4 * q + ii);
          if (k == 0 && prefetch) {
            for (int line = 0; line < 3; ++line) {
              _mm_prefetch(reinterpret_cast<const char*>(v + 64 * line + kPrefetchAhead),
                           _MM_HINT_T0);
            }
          }
          const __m256i ql =
              Load(v + 32 * h + 64 * (k % 2));  // k even: ql bytes 64n + 4i, odd: + 32
          const __m256i qh = Load(v + 32 * h + 128);
          const __m256i nib = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low);
          const __m256i hb = k == 0   ? _mm256_slli_epi16(qh, 4)
                             : k == 1 ? _mm256_slli_epi16(qh, 2)
                             : k == 2 ? qh
                                      : _mm256_srli_epi16(qh, 2);
          e[ii] = _mm256_or_si256(nib, _mm256_and_si256(hb, two));
        }
        const __m256i sc = LoadI8x8(side + kQ6KScales + 16 * (8 * n + 2 * k + q) + 8 * h);
        for (int r = 0; r < MR; ++r) {
          const __m256i dot = DotDwords<4, 2>(e, Quants(x[r], b) + 128 * n + 32 * k + 16 * q);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(dot, sc));
        }
      }
    }
  }
  __m256i scale_pairs[8];
  for (int k = 0; k < 8; ++k) {
    const __m256i even = LoadI8x8(side + kQ6KScales + 16 * (2 * k) + 8 * h);
    const __m256i odd = LoadI8x8(side + kQ6KScales + 16 * (2 * k + 1) + 8 * h);
    scale_pairs[k] = _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi32(0xffff)),
                                     _mm256_slli_epi32(odd, 16));
  }
  const __m256 d = LoadF16x8(side + kQ6KD + 16 * h);
  for (int r = 0; r < MR; ++r) {
    const __m256i offset = DotPairs(_mm256_setzero_si256(), scale_pairs, 8, Bsums(x[r], b));
    const __m256i total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(offset, 5));
    const __m256 dx = _mm256_set1_ps(Dx(x[r], b));
    const __m256 block =
        Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(total), Rounded(_mm256_mul_ps(d, dx))));
    _mm256_store_ps(acc[r], Rounded(_mm256_add_ps(_mm256_load_ps(acc[r]), block)));
  }
}

// Decode (one activation row): both halves of a super-block together, so that each 64-byte weight
// vector is first read once and in address order, and no software prefetch: the group is one
// forward stream, which the hardware prefetchers follow. On a Zen 3 VM (2 threads, the engine's
// pool and pieces, DRAM-bound; bench/kquant_decode_ab.cc) this read 20-24 GB/s where the two-pass
// tile with its prefetches read 15-17 (docs/benchmarks.md). Q4_K and Q5_K: one pass, each
// activation dword broadcast once for the 16 rows; Q6_K: four 12-line windows, each read for half
// 0 and then (from L1) for half 1.
// Without VNNI, a sub-block's int16 pair sums are weighed by its scale in the vpmaddwd that
// widens them (scale pairs (sc, sc): |sc| <= 127 times a pair sum <= 32256 is exact in int32), so
// the per-sub-block vpmulld of the multi-row tiles is gone; the integers, and so the bits, are
// theirs.

// The 16 bytes at p (byte l = row l) for rows 8h .. 8h + 7, one per dword lane, in both int16
// halves of the dword: (v, v) for vpmaddwd; signed bytes are sign-extended.
template <bool kSigned>
inline __m256i BytePairsOfHalf(const uint8_t* p, int h) {
  const __m256i bytes =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  // Each int16 gets its row's byte in its high byte (the low byte zeroed), then shifts down.
  const int r = 8 * h;
  const __m256i pick = _mm256_setr_epi8(
      -1, r, -1, r, -1, r + 1, -1, r + 1, -1, r + 2, -1, r + 2, -1, r + 3, -1, r + 3,  //
      -1, r + 4, -1, r + 4, -1, r + 5, -1, r + 5, -1, r + 6, -1, r + 6, -1, r + 7, -1, r + 7);
  const __m256i high = _mm256_shuffle_epi8(bytes, pick);
  return kSigned ? _mm256_srai_epi16(high, 8) : _mm256_srli_epi16(high, 8);
}

// isum += the int16 pairs' sums weighed by the sub-block's scale (non-VNNI), or dot · scale (VNNI,
// where `dot` already holds int32 sums); scales16 points at the sub-block's 16 scale bytes.
template <bool kSigned>
inline __m256i AddScaled(__m256i isum, __m256i dot, const uint8_t* scales16, int h) {
  if constexpr (kVnni) {
    const __m256i sc = kSigned ? LoadI8x8(scales16 + 8 * h) : LoadU8x8(scales16 + 8 * h);
    return _mm256_add_epi32(isum, _mm256_mullo_epi32(dot, sc));
  } else {
    return _mm256_add_epi32(isum, _mm256_madd_epi16(dot, BytePairsOfHalf<kSigned>(scales16, h)));
  }
}

// dot (int16 pairs, or int32 sums with VNNI) += weights w · the activation dword a.
inline __m256i AddDot(__m256i dot, __m256i w, __m256i a) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_avx_epi32(dot, w, a);
  } else {
    return _mm256_add_epi16(dot, _mm256_maddubs_epi16(w, a));
  }
}

// The float tail of a super-block for half h: acc += (isum · (d · dx)) - (msum · (dmin · dx)),
// rounded as the scalar tile rounds (dmin == nullptr: no minimum term, Q6_K).
inline void AddSuperBlock(float* acc, __m256i isum, __m256i msum, const uint8_t* d,
                          const uint8_t* dmin, float dx_scalar) {
  const __m256 dx = _mm256_set1_ps(dx_scalar);
  __m256 block =
      Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), Rounded(_mm256_mul_ps(LoadF16x8(d), dx))));
  if (dmin != nullptr) {
    block = Rounded(
        _mm256_sub_ps(block, Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(msum),
                                                   Rounded(_mm256_mul_ps(LoadF16x8(dmin), dx))))));
  }
  _mm256_store_ps(acc, Rounded(_mm256_add_ps(_mm256_load_ps(acc), block)));
}

// acc[h] (the 8 lanes of half h, h = 0, 1) += super-block sb's sum for the one row x (block b).
template <bool kQ5>
void K4SuperBlockOneRow(const uint8_t* sb, int b, const uint8_t* x, float* const acc[2]) {
  const uint8_t* side = sb;
  const uint8_t* quants = sb + kKSideBytes;
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i four = _mm256_set1_epi8(0x10);
  const int8_t* xq = Quants(x, b);
  __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high nibbles)
    __m256i dot[2][2];           // [nibble][half]
    for (int i = 0; i < 8; ++i) {
      const uint8_t* v = quants + 64 * (8 * p + i);
      const __m256i a_low = Bcast32(xq + 64 * p + 4 * i);
      const __m256i a_high = Bcast32(xq + 64 * p + 32 + 4 * i);
      for (int h = 0; h < 2; ++h) {
        const __m256i g = Load(v + 32 * h);
        __m256i w_low = _mm256_and_si256(g, low);
        __m256i w_high = _mm256_and_si256(_mm256_srli_epi16(g, 4), low);
        if constexpr (kQ5) {
          const __m256i qh = Load(quants + kQ5KQh + 64 * i + 32 * h);
          w_low = _mm256_or_si256(w_low, _mm256_and_si256(BitToFour(qh, 2 * p), four));
          w_high = _mm256_or_si256(w_high, _mm256_and_si256(BitToFour(qh, 2 * p + 1), four));
        }
        if (i == 0 && !kVnni) {
          dot[0][h] = _mm256_maddubs_epi16(w_low, a_low);
          dot[1][h] = _mm256_maddubs_epi16(w_high, a_high);
        } else {
          if (i == 0) dot[0][h] = dot[1][h] = _mm256_setzero_si256();
          dot[0][h] = AddDot(dot[0][h], w_low, a_low);
          dot[1][h] = AddDot(dot[1][h], w_high, a_high);
        }
      }
      if (kQ5 && !kVnni && i % 4 == 3) {  // Q5_K pairs reach 2 * 31 * 128: widen every 4 dwords
        for (int h = 0; h < 2; ++h) {
          for (int n = 0; n < 2; ++n) {
            isum[h] = AddScaled<false>(isum[h], dot[n][h], side + kQ4KScales + 16 * (2 * p + n), h);
            dot[n][h] = _mm256_setzero_si256();
          }
        }
      }
    }
    if (!kQ5 || kVnni) {
      for (int h = 0; h < 2; ++h) {
        for (int n = 0; n < 2; ++n) {
          isum[h] = AddScaled<false>(isum[h], dot[n][h], side + kQ4KScales + 16 * (2 * p + n), h);
        }
      }
    }
  }
  const uint8_t* bsums = Bsums(x, b);
  for (int h = 0; h < 2; ++h) {
    __m256i msum = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      msum = _mm256_add_epi32(msum,
                              _mm256_madd_epi16(BytePairsOfHalf<false>(side + kQ4KMins + 16 * s, h),
                                                Bcast32(bsums + 4 * s)));
    }
    AddSuperBlock(acc[h], isum[h], msum, side + kQ4KD + 16 * h, side + kQ4KDmin + 16 * h, Dx(x, b));
  }
}

// The 6-bit values of Q6_K sub-block 8n + 2k + q, one dword of one half: nibbles of `ql` (k < 2:
// low, else high) with bits 4, 5 from `qh` (k = 0: its bits 0-1, 1: 2-3, 2: 4-5, 3: 6-7).
inline __m256i Q6Values(__m256i ql, __m256i qh, int k) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i two = _mm256_set1_epi8(0x30);
  const __m256i nib = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low);
  const __m256i hb = k == 0   ? _mm256_slli_epi16(qh, 4)
                     : k == 1 ? _mm256_slli_epi16(qh, 2)
                     : k == 2 ? qh
                              : _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(nib, _mm256_and_si256(hb, two));
}

// acc[h] (the 8 lanes of half h, h = 0, 1) += super-block sb's sum for the one row x (block b).
// The quant part in four windows of 12 lines (half n, q: vectors 4 apart), each read for half 0
// then half 1, so that every line is first read in address order.
void Q6KSuperBlockOneRow(const uint8_t* sb, int b, const uint8_t* x, float* const acc[2]) {
  const uint8_t* side = sb;
  const uint8_t* quants = sb + kKSideBytes;
  const int8_t* xq = Quants(x, b);
  constexpr int kPerWiden = kVnni ? 4 : 2;  // values below 64: two dwords per int16 pair sum
  __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int nq = 0; nq < 4; ++nq) {
    const int n = nq / 2, q = nq % 2;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i dot[4];  // sub-block 8n + 2k + q
#pragma GCC unroll 4
      for (int ii = 0; ii < 4; ++ii) {
        const uint8_t* v = quants + 3 * 64 * (8 * n + 4 * q + ii);
        const __m256i ql0 = Load(v + 32 * h);
        const __m256i ql1 = Load(v + 64 + 32 * h);
        const __m256i qh = Load(v + 128 + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m256i a = Bcast32(xq + 128 * n + 32 * k + 16 * q + 4 * ii);
          if (ii % kPerWiden == 0) dot[k] = _mm256_setzero_si256();
          dot[k] = AddDot(dot[k], Q6Values(k % 2 ? ql1 : ql0, qh, k), a);
        }
        if (ii % kPerWiden == kPerWiden - 1) {
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            isum[h] =
                AddScaled<true>(isum[h], dot[k], side + kQ6KScales + 16 * (8 * n + 2 * k + q), h);
          }
        }
      }
    }
  }
  const uint8_t* bsums = Bsums(x, b);
  for (int h = 0; h < 2; ++h) {
    __m256i offset = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i even = LoadI8x8(side + kQ6KScales + 16 * (2 * k) + 8 * h);
      const __m256i odd = LoadI8x8(side + kQ6KScales + 16 * (2 * k + 1) + 8 * h);
      const __m256i pair = _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi32(0xffff)),
                                           _mm256_slli_epi32(odd, 16));
      offset = _mm256_add_epi32(offset, _mm256_madd_epi16(pair, Bcast32(bsums + 4 * k)));
    }
    AddSuperBlock(acc[h], _mm256_sub_epi32(isum[h], _mm256_slli_epi32(offset, 5)),
                  _mm256_setzero_si256(), side + kQ6KD + 16 * h, nullptr, Dx(x, b));
  }
}

template <GgmlType T, int MR>
void SuperBlockHalfRows(const uint8_t* sb, int b, int h, const uint8_t* const* x, bool prefetch,
                        float (*acc)[kHalfLanes]) {
  if constexpr (T == GgmlType::kQ6_K) {
    Q6KSuperBlockHalf<MR>(sb, b, h, x, prefetch, acc);
  } else {
    K4SuperBlockHalf<T == GgmlType::kQ5_K, MR>(sb, b, h, x, prefetch, acc);
  }
}

// Rows x[0 .. mr) with mr (1 .. kMr) fixed at compile time.
template <GgmlType T, int MR = 1>
void SuperBlockHalfRowsOf(int mr, const uint8_t* sb, int b, int h, const uint8_t* const* x,
                          bool prefetch, float (*acc)[kHalfLanes]) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return SuperBlockHalfRows<T, MR>(sb, b, h, x, prefetch, acc);
    SuperBlockHalfRowsOf<T, MR + 1>(mr, sb, b, h, x, prefetch, acc);
  }
}

// Rows [i0, i0 + n_rows) (n_rows <= kPassRows) of the outputs j0 .. j0 + 15 of one group.
// kOneRowStream: one activation row takes the one-row tiles (no software prefetch); otherwise the
// two-pass tiles with their prefetch (the same bits either way).
template <GgmlType T, bool kOneRowStream>
void GroupPass(const MatmulTile& t, const uint8_t* group, int i0, int n_rows, int j0) {
  constexpr size_t kStride = T == GgmlType::kQ6_K   ? kQ6KStride
                             : T == GgmlType::kQ5_K ? kQ5KStride
                                                    : kQ4KStride;
  const uint8_t* x[kPassRows];
  for (int r = 0; r < n_rows; ++r) x[r] = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
  alignas(32) float acc[2][kPassRows][kHalfLanes] = {};
  const int halves = j0 + kHalfLanes < t.n_end ? 2 : 1;
  for (int b = 0; b < t.k / 256; ++b) {
    const uint8_t* sb = group + kStride * static_cast<size_t>(b);
    if (kOneRowStream && n_rows == 1 && halves == 2) {
      float* const acc_row[2] = {acc[0][0], acc[1][0]};
      if constexpr (T == GgmlType::kQ6_K) {
        Q6KSuperBlockOneRow(sb, b, x[0], acc_row);
      } else {
        K4SuperBlockOneRow<T == GgmlType::kQ5_K>(sb, b, x[0], acc_row);
      }
      continue;
    }
    for (int h = 0; h < halves; ++h) {
      for (int c = 0; c < n_rows; c += kMr) {
        SuperBlockHalfRowsOf<T>(std::min(kMr, n_rows - c), sb, b, h, x + c, h == 0 && c == 0,
                                acc[h] + c);
      }
    }
  }
  for (int h = 0; h < halves; ++h) {
    const int valid = t.n_end - (j0 + kHalfLanes * h);
    for (int r = 0; r < n_rows; ++r) {
      StoreHalf(t.y + static_cast<size_t>(i0 + r) * t.ldy + j0 + kHalfLanes * h,
                _mm256_load_ps(acc[h][r]), valid);
    }
  }
}

template <GgmlType T, bool kOneRowStream = true>
void MatmulKx16(const MatmulTile& t) {
  assert(t.k % 256 == 0 && t.n_begin % kGroupRows == 0 && t.n_begin <= t.n_end);
  if (t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += kGroupRows) {
    const uint8_t* group = t.w + static_cast<size_t>(j0 / kGroupRows) * t.w_row_bytes;
    for (int i0 = 0; i0 < t.m; i0 += kPassRows) {
      GroupPass<T, kOneRowStream>(t, group, i0, std::min(kPassRows, t.m - i0), j0);
    }
  }
}

}  // namespace
}  // namespace kvserve
