// The x16 Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 tiles of the AVX2-class tables (packed_blocks32.h
// layout): included by blocks32_x16_avx2.cc (AVX2: vpmaddubsw) and blocks32_x16_avxvnni.cc
// (AVX-VNNI: vpdpbusd on 256 bits), and by nothing else; everything is in an anonymous namespace so
// each translation unit gets its own copy compiled for its own instruction set.
//
// The arithmetic of blocks32_x16_avx512.cc with 8 rows per vector, half h of a 16-row group (rows
// 8h .. 8h + 7, bytes 32h .. 32h + 31 of every 64-byte dword vector). Exact integer dots without
// VNNI: Q4_1 and Q5_x weights are at most 31, so four dwords of vpmaddubsw pairs (each at most
// 2 * 31 * 128) add up in int16 (<= 31744) before vpmaddwd widens them; IQ4_NL's unsigned value
// u = v + 128 (1 .. 241) is split into u & 127 and u & 128, whose pairs (at most 32512 and
// 32768 in magnitude) fit int16 one dword at a time. MXFP4's doubled table plus 12 is 0 .. 24:
// a pair is at most 2 * 24 * 128 = 6144, four dwords' pairs at most 24576 < 32767, so it takes
// Q4_1's path.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "blocks32_x16_avx2.h is for the AVX2-class translation units only"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "io/ggml_type.h"
#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_blocks32.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/cpu/x16_helpers_avx2.h"

namespace kvserve {
namespace {

#if defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

constexpr int kMr = 4;
static_assert(kPrefetchLevelRows <= kMr);

inline float F16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

template <GgmlType T>
struct Act {
  static constexpr bool kQ8_1 = T == GgmlType::kQ4_1 || T == GgmlType::kQ5_1;
  static constexpr size_t kBytes = kQ8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  static constexpr size_t kQuants =
      kQ8_1 ? offsetof(BlockQ8_1, quants) : offsetof(BlockQ8_0, quants);
};

template <GgmlType T>
constexpr int kOffset = T == GgmlType::kQ5_0     ? 16
                        : T == GgmlType::kIQ4_NL ? 128
                        : T == GgmlType::kMXFP4  ? 12
                                                 : 0;

// The weights' scales of half h of a block's side part, lanes 8h .. 8h + 7: f16, or MXFP4's E8M0
// bytes as E8M0Half's floats, bit for bit: (e - 1) << 23 for e >= 2, 0x00200000 << e below.
template <GgmlType T>
inline __m256 WeightScales(const uint8_t* side, int h) {
  if constexpr (T == GgmlType::kMXFP4) {
    const __m256i e = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(side + 8 * h)));  // 0 .. 255
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(tiny, normal, _mm256_cmpgt_epi32(e, one)));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(side + 16 * h)));
  }
}

// The unsigned weights of one block of half h: w[d] elements 4d .. 4d + 3, w[4 + d] 16 + 4d .. .
template <GgmlType T>
inline void LoadWeights(const uint8_t* quant, __m256i w[8]) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int d = 0; d < 4; ++d) {
    const __m256i g = Load(quant + 64 * d);
    w[d] = _mm256_and_si256(g, low);
    w[4 + d] = _mm256_and_si256(_mm256_srli_epi16(g, 4), low);
  }
  if constexpr (T == GgmlType::kQ5_0 || T == GgmlType::kQ5_1) {
    const __m256i qh = Load(quant + 4 * 64);
    const __m256i four = _mm256_set1_epi8(0x10);
    for (int d = 0; d < 4; ++d) {
      w[d] = _mm256_or_si256(w[d], _mm256_and_si256(BitToFour(qh, d), four));
      w[4 + d] = _mm256_or_si256(w[4 + d], _mm256_and_si256(BitToFour(qh, d + 4), four));
    }
  }
  if constexpr (T == GgmlType::kIQ4_NL || T == GgmlType::kMXFP4) {
    alignas(16) int8_t table[16];
    for (int i = 0; i < 16; ++i) {
      table[i] = static_cast<int8_t>(T == GgmlType::kIQ4_NL ? kIq4NlValues[i] + 128
                                                            : kMxfp4Values[i] + kOffset<T>);
    }
    const __m256i lut =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table)));
    for (int d = 0; d < 8; ++d) w[d] = _mm256_shuffle_epi8(lut, w[d]);
  }
}

// Σ_d w[d] · (activation dword at xq + 4d), d < 4, exact, int32 lanes.
template <GgmlType T>
inline __m256i Dot4(const __m256i* w, const int8_t* xq) {
  if constexpr (kVnni) {
    __m256i s = _mm256_setzero_si256();
    for (int d = 0; d < 4; ++d) s = _mm256_dpbusd_avx_epi32(s, w[d], Bcast32(xq + 4 * d));
    return s;
  } else if constexpr (T == GgmlType::kIQ4_NL) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i seven = _mm256_set1_epi8(0x7f);
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i s = _mm256_setzero_si256();
    for (int d = 0; d < 4; ++d) {
      const __m256i x = Bcast32(xq + 4 * d);
      s = _mm256_add_epi32(
          s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(w[d], seven), x), ones));
      s = _mm256_add_epi32(
          s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(w[d], top), x), ones));
    }
    return s;
  } else {
    __m256i pairs = _mm256_maddubs_epi16(w[0], Bcast32(xq));
    for (int d = 1; d < 4; ++d) {
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[d], Bcast32(xq + 4 * d)));
    }
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
}

template <GgmlType T, int MR, PrefetchLevel L = PrefetchLevel::kL1>
void HalfTile(const MatmulTile& t, const uint8_t* group, const int32_t* x_sums, int i0, int j0,
              int h) {
  const int n_blocks = t.k / 32;
  const BlockBundles bundles = Packed32BundlesOf<T>(n_blocks);
  __m256 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  for (int b = 0; b < n_blocks; ++b) {
    __m256i w[8];
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    const uint8_t* side = group + bundles.SideOffset(b);
    if (h == 0) PrefetchLinesAhead<L>(quants, bundles.StreamBytes(b));
    LoadWeights<T>(quants + 32 * h, w);
    const __m256 dw = WeightScales<T>(side, h);
    for (int r = 0; r < MR; ++r) {
      const uint8_t* xb = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes + Act<T>::kBytes * b;
      const int8_t* xq = reinterpret_cast<const int8_t*>(xb + Act<T>::kQuants);
      __m256i isum = _mm256_add_epi32(Dot4<T>(w, xq), Dot4<T>(w + 4, xq + 16));
      if constexpr (kOffset<T> != 0) {
        isum = _mm256_sub_epi32(
            isum, _mm256_set1_epi32(kOffset<T> * x_sums[static_cast<size_t>(r) * n_blocks + b]));
      }
      const __m256 dx = _mm256_set1_ps(F16(xb));
      const __m256 prod =
          Rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), Rounded(_mm256_mul_ps(dw, dx))));
      if constexpr (Act<T>::kQ8_1) {
        const __m256 mw =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(side + 32 + 16 * h)));
        const __m256 term =
            Rounded(_mm256_add_ps(prod, Rounded(_mm256_mul_ps(mw, _mm256_set1_ps(F16(xb + 2))))));
        acc[r] = Rounded(_mm256_add_ps(acc[r], term));
      } else {
        acc[r] = Rounded(_mm256_add_ps(acc[r], prod));
      }
    }
  }
  const int valid = t.n_end - (j0 + kHalfLanes * h);
  for (int r = 0; r < MR; ++r) {
    StoreHalf(t.y + static_cast<size_t>(i0 + r) * t.ldy + j0 + kHalfLanes * h, acc[r], valid);
  }
}

template <GgmlType T, PrefetchLevel L, int MR = 1>
void HalfTileOf(int mr, const MatmulTile& t, const uint8_t* group, const int32_t* x_sums, int i0,
                int j0, int h) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return HalfTile<T, MR, L>(t, group, x_sums, i0, j0, h);
    HalfTileOf<T, L, MR + 1>(mr, t, group, x_sums, i0, j0, h);
  }
}

// L: where the tiles of up to kPrefetchLevelRows activation rows (decode, speculation's verify
// steps) prefetch; more rows take the L1 tiles.
template <GgmlType T, PrefetchLevel L = PrefetchLevel::kL1>
void MatmulX16(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.n_begin % kGroupRows == 0 && t.n_begin <= t.n_end);
  if (t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  const int n_blocks = t.k / 32;
  int32_t* x_sums = nullptr;
  if constexpr (kOffset<T> != 0) {
    x_sums = static_cast<int32_t*>(
        t.scratch->x.Get(sizeof(int32_t) * static_cast<size_t>(t.m) * n_blocks));
    assert(x_sums != nullptr);
    ActivationBlockSums(t.x, t.x_row_bytes, Act<T>::kBytes, Act<T>::kQuants, t.m, n_blocks, x_sums);
  }
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += kGroupRows) {
    const uint8_t* group = t.w + static_cast<size_t>(j0 / kGroupRows) * t.w_row_bytes;
    for (int h = 0; h < 2 && j0 + kHalfLanes * h < t.n_end; ++h) {
      if (L != PrefetchLevel::kL1 && t.m <= kPrefetchLevelRows) {
        HalfTileOf<T, L>(t.m, t, group, x_sums, 0, j0, h);
        continue;
      }
      for (int i0 = 0; i0 < t.m; i0 += kMr) {
        HalfTileOf<T, PrefetchLevel::kL1>(
            std::min(kMr, t.m - i0), t, group,
            x_sums != nullptr ? x_sums + static_cast<size_t>(i0) * n_blocks : nullptr, i0, j0, h);
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
