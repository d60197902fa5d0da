// AVX-512 VNNI tiles of Q4_K, Q5_K and Q6_K matrices in the x16 layout (packed_kquants.h) against
// Q8_K activations: the scalar tiles' bits, for every m and 16-aligned output range.
//
// Lane l of every vector is weight row j0 + l. Per super-block and activation row, vpdpbusd of the
// unsigned weight dwords against broadcast activation dwords gives each sub-block's exact integer
// dot in one int32 lane per row, vpmulld weighs it by the lane's sub-block scale, and vpdpwssd of
// the scale (or min) pairs against the activation's bsums gives the offset term; all exact, so the
// integer isum (and Q4_K's msum) equal the scalar tile's. The float part is the scalar tile's
// expression, operation for operation, with one lane per row:
//   Q4_K, Q5_K: block = float(isum) * (d * dx); block = block - float(msum) * (dmin * dx); sum +=
//   block; Q6_K: sum = sum + float(isum) * (d * dx);
// over the super-blocks in increasing order from sum = 0.
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/packed_kquants.h"
#include "kernels/cpu/x16_helpers_avx512.h"
#include "kernels/ggml_blocks.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = kX16Lanes;
// Activation rows per pass over a group's super-block: its weights are unpacked once per pass.
constexpr int kMr = 8;
// Bytes ahead of the weight vector being read that are prefetched into L1 (the hardware
// prefetcher alone left single-thread Q4_K decode about 20% behind llama.cpp's on this machine).
constexpr int kPrefetchAhead = 2048;

inline __m512i Load(const uint8_t* p) { return _mm512_loadu_si512(p); }

inline __m128i Load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

inline __m512 LoadF16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The activation rows of one pass and where their outputs go.
template <int MR>
struct Rows {
  const uint8_t* x[MR];  // row r's Q8_K blocks
  float* y[MR];          // row r's 16 outputs of this group
};

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

// ---- Q4_K and Q5_K ----

// isum[r] += the scale-weighted dots of sub-blocks 2p and 2p + 1 of super-block b.
template <bool kQ5, int MR>
inline void K4Pair(const uint8_t* quant, const uint8_t* side, int p, int b, const Rows<MR>& rows,
                   __m512i* isum) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i high = _mm512_set1_epi8(static_cast<char>(0xf0));
  const __m512i four = _mm512_set1_epi8(0x10);
  // dword 8p + i: sub-block 2p's weights; sub-block 2p + 1's, times 16 for Q4_K (the nibble in
  // place), as values for Q5_K (bit 4 of element l of sub-block s is bit s of qh[l]).
  __m512i wl[8], wh[8];
  for (int i = 0; i < 8; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(quant + 64 * (8 * p + i) + kPrefetchAhead),
                 _MM_HINT_T0);
    const __m512i g = Load(quant + 64 * (8 * p + i));
    if constexpr (kQ5) {
      const __m512i h = Load(quant + kQ5KQh + 64 * i);
      wl[i] =
          _mm512_or_si512(_mm512_and_si512(g, low), _mm512_and_si512(BitToFour(h, 2 * p), four));
      wh[i] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(g, 4), low),
                              _mm512_and_si512(BitToFour(h, 2 * p + 1), four));
    } else {
      wl[i] = _mm512_and_si512(g, low);
      wh[i] = _mm512_and_si512(g, high);
    }
  }
  const __m512i sc_lo = _mm512_cvtepu8_epi32(Load128(side + kQ4KScales + 16 * (2 * p)));
  const __m512i sc_hi = _mm512_cvtepu8_epi32(Load128(side + kQ4KScales + 16 * (2 * p + 1)));
  for (int r = 0; r < MR; ++r) {
    const int8_t* xq = Quants(rows.x[r], b) + 64 * p;
    __m512i s_lo = _mm512_setzero_si512();
    __m512i s_hi16 = _mm512_setzero_si512();
    for (int i = 0; i < 8; ++i) {
      s_lo = _mm512_dpbusd_epi32(s_lo, wl[i], Bcast32(xq + 4 * i));
      s_hi16 = _mm512_dpbusd_epi32(s_hi16, wh[i], Bcast32(xq + 32 + 4 * i));
    }
    // Q4_K: every product of s_hi16 is 16 x nibble x quant, so the shift is exact.
    const __m512i s_hi = kQ5 ? s_hi16 : _mm512_srai_epi32(s_hi16, 4);
    isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_mullo_epi32(s_lo, sc_lo),
                                                         _mm512_mullo_epi32(s_hi, sc_hi)));
  }
}

template <bool kQ5, int MR>
void K4Group(const uint8_t* group, int n_sb, const Rows<MR>& rows, __mmask16 mask) {
  constexpr size_t kStride = kQ5 ? kQ5KStride : kQ4KStride;
  constexpr size_t kQuantPart = kQ5 ? kQ5KQuantPart : kQ4KQuantPart;
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < n_sb; ++b) {
    const uint8_t* quant = group + kStride * static_cast<size_t>(b);
    const uint8_t* side = quant + kQuantPart;
    __m512i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) K4Pair<kQ5, MR>(quant, side, p, b, rows, isum);
    // Lane l of min_pairs[s]: (min_s, min_s) of row l as int16, against (bsums[2s], bsums[2s+1]).
    __m512i min_pairs[8];
    for (int s = 0; s < 8; ++s) {
      const __m512i m = _mm512_cvtepu8_epi32(Load128(side + kQ4KMins + 16 * s));
      min_pairs[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    }
    const __m512 d = LoadF16(side + kQ4KD);
    const __m512 dmin = LoadF16(side + kQ4KDmin);
    for (int r = 0; r < MR; ++r) {
      const uint8_t* bsums = Bsums(rows.x[r], b);
      __m512i msum = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) {
        msum = _mm512_dpwssd_epi32(msum, min_pairs[s], Bcast32(bsums + 4 * s));
      }
      const __m512 dx = _mm512_set1_ps(Dx(rows.x[r], b));
      __m512 block =
          Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[r]), Rounded(_mm512_mul_ps(d, dx))));
      block = Rounded(_mm512_sub_ps(
          block,
          Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(msum), Rounded(_mm512_mul_ps(dmin, dx))))));
      acc[r] = Rounded(_mm512_add_ps(acc[r], block));
    }
  }
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(rows.y[r], mask, acc[r]);
}

// ---- Q6_K ----

// isum[r] += the scale-weighted dots (of the stored values q + 32) of quarter q of half n of
// super-block b: elements 128n + 32k + 16q + [0, 16) for k = 0..3, sub-block 8n + 2k + q.
template <int MR>
inline void Q6KQuarter(const uint8_t* quant, const uint8_t* side, int n, int q, int b,
                       const Rows<MR>& rows, __m512i* isum) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i two = _mm512_set1_epi8(0x30);
  __m512i e[4][4];  // [k][ii]: elements 128n + 32k + 16q + 4ii .. + 3, values 0 .. 63
  for (int ii = 0; ii < 4; ++ii) {
    const uint8_t* v = quant + 3 * 64 * (8 * n + 4 * q + ii);
    for (int line = 0; line < 3; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(v + 64 * line + kPrefetchAhead), _MM_HINT_T0);
    }
    const __m512i a = Load(v);        // ql bytes 64n + 4i, i = 4q + ii
    const __m512i c = Load(v + 64);   // ql bytes 64n + 32 + 4i
    const __m512i h = Load(v + 128);  // qh bytes 32n + 4i
    e[0][ii] =
        _mm512_or_si512(_mm512_and_si512(a, low), _mm512_and_si512(_mm512_slli_epi16(h, 4), two));
    e[1][ii] =
        _mm512_or_si512(_mm512_and_si512(c, low), _mm512_and_si512(_mm512_slli_epi16(h, 2), two));
    e[2][ii] =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), low), _mm512_and_si512(h, two));
    e[3][ii] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 4), low),
                               _mm512_and_si512(_mm512_srli_epi16(h, 2), two));
  }
  __m512i sc[4];
  for (int k = 0; k < 4; ++k) {
    sc[k] = _mm512_cvtepi8_epi32(Load128(side + kQ6KScales + 16 * (8 * n + 2 * k + q)));
  }
  for (int r = 0; r < MR; ++r) {
    const int8_t* xq = Quants(rows.x[r], b) + 128 * n + 16 * q;
    for (int k = 0; k < 4; ++k) {
      __m512i s = _mm512_setzero_si512();
      for (int ii = 0; ii < 4; ++ii)
        s = _mm512_dpbusd_epi32(s, e[k][ii], Bcast32(xq + 32 * k + 4 * ii));
      isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(s, sc[k]));
    }
  }
}

template <int MR>
void Q6KGroup(const uint8_t* group, int n_sb, const Rows<MR>& rows, __mmask16 mask) {
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < n_sb; ++b) {
    const uint8_t* quant = group + kQ6KStride * static_cast<size_t>(b);
    const uint8_t* side = quant + kQ6KQuantPart;
    __m512i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm512_setzero_si512();
    for (int n = 0; n < 2; ++n) {
      for (int q = 0; q < 2; ++q) Q6KQuarter<MR>(quant, side, n, q, b, rows, isum);
    }
    // Lane l of scale_pairs[k]: (scale_2k, scale_2k+1) of row l as int16, against
    // (bsums[2k], bsums[2k+1]): the offset term Σ_s scale_s * bsum_s of the stored q + 32.
    __m512i scale_pairs[8];
    for (int k = 0; k < 8; ++k) {
      const __m512i even = _mm512_cvtepi8_epi32(Load128(side + kQ6KScales + 16 * (2 * k)));
      const __m512i odd = _mm512_cvtepi8_epi32(Load128(side + kQ6KScales + 16 * (2 * k + 1)));
      scale_pairs[k] = _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi32(0xffff)),
                                       _mm512_slli_epi32(odd, 16));
    }
    const __m512 d = LoadF16(side + kQ6KD);
    for (int r = 0; r < MR; ++r) {
      const uint8_t* bsums = Bsums(rows.x[r], b);
      __m512i offset = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        offset = _mm512_dpwssd_epi32(offset, scale_pairs[k], Bcast32(bsums + 4 * k));
      }
      const __m512i total = _mm512_sub_epi32(isum[r], _mm512_slli_epi32(offset, 5));
      const __m512 dx = _mm512_set1_ps(Dx(rows.x[r], b));
      const __m512 block =
          Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(total), Rounded(_mm512_mul_ps(d, dx))));
      acc[r] = Rounded(_mm512_add_ps(acc[r], block));
    }
  }
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(rows.y[r], mask, acc[r]);
}

// ---- the tile ----

template <GgmlType T, int MR>
void GroupRows(const MatmulTile& t, const uint8_t* group, int i0, int j0) {
  Rows<MR> rows;
  for (int r = 0; r < MR; ++r) {
    rows.x[r] = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
    rows.y[r] = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
  }
  if constexpr (T == GgmlType::kQ6_K) {
    Q6KGroup<MR>(group, t.k / 256, rows, StoreMask(j0, t.n_end));
  } else {
    K4Group<T == GgmlType::kQ5_K, MR>(group, t.k / 256, rows, StoreMask(j0, t.n_end));
  }
}

// Rows [i0, i0 + mr) with mr (1 .. kMr) fixed at compile time.
template <GgmlType T, int MR = 1>
void GroupRowsOf(int mr, const MatmulTile& t, const uint8_t* group, int i0, int j0) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return GroupRows<T, MR>(t, group, i0, j0);
    GroupRowsOf<T, MR + 1>(mr, t, group, i0, j0);
  }
}

template <GgmlType T>
void MatmulKx16(const MatmulTile& t) {
  assert(t.k % 256 == 0 && t.n_begin % kLanes == 0 && t.n_begin <= t.n_end);
  if (t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += kLanes) {
    const uint8_t* group = t.w + static_cast<size_t>(j0 / kLanes) * t.w_row_bytes;
    for (int i0 = 0; i0 < t.m; i0 += kMr) {
      GroupRowsOf<T>(std::min(kMr, t.m - i0), t, group, i0, j0);
    }
  }
}

}  // namespace

void MatmulQ4_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ4_K>(t); }
void MatmulQ5_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ5_K>(t); }
void MatmulQ6_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ6_K>(t); }

}  // namespace kvserve::avx512
