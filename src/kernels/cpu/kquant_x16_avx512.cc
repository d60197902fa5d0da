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
//
// Up to 16 activation rows visit each super-block of a 16-row weight group in one pass, in chunks
// of up to 8 whose vpdpbusd chains are interleaved row by row (8 chains in flight, the 4-cycle
// latency covered). So at 16 streams the weights stream in from memory once per step and the
// second chunk finds them in L1; two 8-row passes over the group had left the first pass waiting
// on memory (16-stream decode on a Q4_K_M tinyllama: 271–294 → 313–336 t/s, alternating runs).
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/packed_kquants.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/x16_helpers_avx512.h"
#include "kernels/ggml_blocks.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = kX16Lanes;
// Activation rows that visit each super-block of a group in one pass, kMr at a time: the group's
// weights stream in from memory once per kPassRows rows (once per step at 16 streams), and the
// second chunk of rows finds the super-block in L1.
constexpr int kPassRows = 16;
// Activation rows per chunk: a super-block's weights are unpacked once per chunk. At 8, GCC 12
// spilled the chunk's registers (664 zmm stack accesses in K4SuperBlock<false, 8> against 92 at
// 6): on a Zen 4 VM (bench/kquant_tile_bench.cc, one thread, m = 16, weights in L2) Q4_K took
// 214 cycles per row-super-block at 8 and 87 at 6 (85-93 at 4-7), Q6_K 157 against 103; tinyllama
// Q4_K_M prefill (pp128, 2 threads, alternating) 121-123 -> 258-266 t/s.
constexpr int kMr = 6;
// Chunks of at most this many rows take Q6KQuarter, larger ones Q6KSubBlock.
constexpr int kQ6KFewRows = 5;
// Bytes ahead of the weight vector being read that are prefetched into L1. Far enough to cover
// memory latency while 16 rows compute on a super-block (at 2 KiB, a 16-stream step waited on
// memory: Q6_K 242 → 285 t/s, Q4_K_M 331 → 355 t/s with 12 KiB); the hardware prefetcher alone
// had left single-thread Q4_K decode about 20% behind llama.cpp's on this machine.
constexpr int kPrefetchAhead = 12288;
// Bytes ahead that the Q4_K/Q5_K quants are also prefetched into L2: with both threads streaming,
// the L1 prefetches alone kept too few lines in flight (Q4_K_M decode, 2 threads, medians of
// alternating runs: 53.0 → 56.9 t/s over 10 rounds; a two-thread tile stream 31-35 → 35-39
// GB/s). One thread alone loses a little (46.7 → 44.8 t/s); the AVX2 tiles gained nothing.
constexpr int kFarPrefetchAhead = 3 * kPrefetchAhead;

inline __m512i Load(const uint8_t* p) { return _mm512_loadu_si512(p); }

inline __m128i Load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

inline __m512 LoadF16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
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

// ---- Q4_K and Q5_K ----

// isum[r] += the scale-weighted dot of sub-block s of super-block b. The rows' dots are
// interleaved, dword by dword, so that MR independent vpdpbusd chains are in flight at once.
template <bool kQ5, int MR, int s>
inline void K4SubBlock(const uint8_t* quant, const uint8_t* side, const int8_t* const* xq,
                       bool prefetch, __m512i* isum) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i four = _mm512_set1_epi8(0x10);
  const int p = s / 2;
  // dword 8p + i holds sub-block 2p in its low nibbles and 2p + 1 in its high ones; for Q5_K,
  // bit 4 of element l of sub-block s is bit s of qh[l].
  __m512i w[8];
  for (int i = 0; i < 8; ++i) {
    const uint8_t* v = quant + 64 * (8 * p + i);
    if (s % 2 == 0 && prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(v + kPrefetchAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(v + kFarPrefetchAhead), _MM_HINT_T1);
    }
    const __m512i g = Load(v);
    w[i] = _mm512_and_si512(s % 2 == 0 ? g : _mm512_srli_epi16(g, 4), low);
    if constexpr (kQ5) {
      w[i] = _mm512_or_si512(w[i],
                             _mm512_and_si512(BitToFour(Load(quant + kQ5KQh + 64 * i), s), four));
    }
  }
  // Fewer than 4 rows: each row's dot splits into kChains chains (dword i into chain i %
  // kChains) so that 4 or more are in flight; integer sums, so the bits do not change.
  constexpr int kChains = MR >= 4 ? 1 : 4 / MR;
  __m512i dot[MR][kChains];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < kChains; ++c) dot[r][c] = _mm512_setzero_si512();
  }
  for (int i = 0; i < 8; ++i) {
    for (int r = 0; r < MR; ++r) {
      __m512i& chain = dot[r][i % kChains];
      chain = DpbusdBcast(chain, w[i], xq[r] + 32 * s + 4 * i);
    }
  }
  const __m512i sc = _mm512_cvtepu8_epi32(Load128(side + kQ4KScales + 16 * s));
  for (int r = 0; r < MR; ++r) {
    __m512i sum = dot[r][0];
    for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, dot[r][c]);
    isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(sum, sc));
  }
}

template <bool kQ5, int MR, int... kS>
inline void K4SubBlocks(const uint8_t* quant, const uint8_t* side, const int8_t* const* xq,
                        bool prefetch, __m512i* isum, std::integer_sequence<int, kS...>) {
  (K4SubBlock<kQ5, MR, kS>(quant, side, xq, prefetch, isum), ...);
}

// acc[r] += the sum of the super-block whose quant part is at `quant` (its side part is the
// kKSideBytes before it) for rows x[0 .. MR) (block b of each row).
template <bool kQ5, int MR>
void K4SuperBlock(const uint8_t* quant, int b, const uint8_t* const* x, bool prefetch,
                  float (*acc)[kLanes]) {
  const uint8_t* side = quant - kKSideBytes;
  if (prefetch && MR <= kSidePrefetchRows) {
    PrefetchLinesAhead(side, kQ4KSidePart);
    if constexpr (kQ5) PrefetchLinesAhead(quant + kQ5KQh, kQ5KQuantPart - kQ5KQh);
  }
  __m512i isum[MR];
  for (int r = 0; r < MR; ++r) isum[r] = _mm512_setzero_si512();
  const int8_t* xq[MR];
  for (int r = 0; r < MR; ++r) xq[r] = Quants(x[r], b);
  K4SubBlocks<kQ5, MR>(quant, side, xq, prefetch, isum, std::make_integer_sequence<int, 8>());
  // Lane l of min_pairs[s]: (min_s, min_s) of row l as int16, against (bsums[2s], bsums[2s+1]).
  __m512i min_pairs[8];
  for (int s = 0; s < 8; ++s) {
    const __m512i m = _mm512_cvtepu8_epi32(Load128(side + kQ4KMins + 16 * s));
    min_pairs[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
  }
  // msum[r] = Σ_s min_s * (bsums[2s] + bsums[2s + 1]), the rows' chains interleaved.
  __m512i msum[MR];
  for (int r = 0; r < MR; ++r) msum[r] = _mm512_setzero_si512();
  for (int s = 0; s < 8; ++s) {
    for (int r = 0; r < MR; ++r) {
      msum[r] = DpwssdBcast(msum[r], min_pairs[s], Bsums(x[r], b) + 4 * s);
    }
  }
  const __m512 d = LoadF16(side + kQ4KD);
  const __m512 dmin = LoadF16(side + kQ4KDmin);
  for (int r = 0; r < MR; ++r) {
    const __m512 dx = _mm512_set1_ps(Dx(x[r], b));
    __m512 block =
        Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[r]), Rounded(_mm512_mul_ps(d, dx))));
    block = Rounded(_mm512_sub_ps(block, Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(msum[r]),
                                                               Rounded(_mm512_mul_ps(dmin, dx))))));
    _mm512_store_ps(acc[r], Rounded(_mm512_add_ps(_mm512_load_ps(acc[r]), block)));
  }
}

// ---- Q6_K ----

// isum[r] += the scale-weighted dots (of the stored values q + 32) of quarter q of half n of
// super-block b: elements 128n + 32k + 16q + [0, 16) for k = 0..3, sub-block 8n + 2k + q. The
// quarter's 16 vectors are unpacked once for all rows: the faster form for few rows (decode).
template <int MR>
inline void Q6KQuarter(const uint8_t* quant, const uint8_t* side, int n, int q, int b,
                       const uint8_t* const* x, bool prefetch, __m512i* isum) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i two = _mm512_set1_epi8(0x30);
  __m512i e[4][4];  // [k][ii]: elements 128n + 32k + 16q + 4ii .. + 3, values 0 .. 63
  for (int ii = 0; ii < 4; ++ii) {
    const uint8_t* v = quant + 3 * 64 * (8 * n + 4 * q + ii);
    for (int line = 0; line < 3 && prefetch; ++line) {
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
    const int8_t* xq = Quants(x[r], b) + 128 * n + 16 * q;
    for (int k = 0; k < 4; ++k) {
      __m512i s = _mm512_setzero_si512();
      for (int ii = 0; ii < 4; ++ii) s = DpbusdBcast(s, e[k][ii], xq + 32 * k + 4 * ii);
      isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(s, sc[k]));
    }
  }
}

// isum[r] += the scale-weighted dot (of the stored values q + 32) of sub-block 8n + 2k + q of
// super-block b: elements 128n + 32k + 16q + [0, 16), the rows' vpdpbusd chains interleaved.
template <int MR, int kN, int kQ, int kK>
inline void Q6KSubBlock(const uint8_t* quant, const uint8_t* side, const int8_t* const* xq,
                        bool prefetch, __m512i* isum) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i two = _mm512_set1_epi8(0x30);
  __m512i e[4];  // elements 128n + 32k + 16q + 4ii .. + 3, values 0 .. 63
  for (int ii = 0; ii < 4; ++ii) {
    const uint8_t* v = quant + 3 * 64 * (8 * kN + 4 * kQ + ii);
    if (kK == 0 && prefetch) {
      for (int line = 0; line < 3; ++line) {
        _mm_prefetch(reinterpret_cast<const char*>(v + 64 * line + kPrefetchAhead), _MM_HINT_T0);
      }
    }
    // v: ql bytes 64n + 4i, then ql bytes 64n + 32 + 4i, then qh bytes 32n + 4i (i = 4q + ii).
    const __m512i l = Load(v + (kK % 2 == 0 ? 0 : 64));
    const __m512i h = Load(v + 128);
    const __m512i lo = kK < 2 ? l : _mm512_srli_epi16(l, 4);
    const __m512i hi = kK == 0   ? _mm512_slli_epi16(h, 4)
                       : kK == 1 ? _mm512_slli_epi16(h, 2)
                       : kK == 2 ? h
                                 : _mm512_srli_epi16(h, 2);
    e[ii] = _mm512_or_si512(_mm512_and_si512(lo, low), _mm512_and_si512(hi, two));
  }
  constexpr int kOffset = 128 * kN + 32 * kK + 16 * kQ;
  __m512i dot[MR];
  for (int r = 0; r < MR; ++r) dot[r] = _mm512_setzero_si512();
  for (int ii = 0; ii < 4; ++ii) {
    for (int r = 0; r < MR; ++r) {
      dot[r] = DpbusdBcast(dot[r], e[ii], xq[r] + kOffset + 4 * ii);
    }
  }
  const __m512i sc = _mm512_cvtepi8_epi32(Load128(side + kQ6KScales + 16 * (8 * kN + 2 * kK + kQ)));
  for (int r = 0; r < MR; ++r) isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(dot[r], sc));
}

// Sub-block t = 8n + 4q + k of Q6KSubBlock (n: half, q: quarter of the half, k: 32-element run).
template <int MR, int... kT>
inline void Q6KSubBlocks(const uint8_t* quant, const uint8_t* side, const int8_t* const* xq,
                         bool prefetch, __m512i* isum, std::integer_sequence<int, kT...>) {
  (Q6KSubBlock<MR, kT / 8, kT / 4 % 2, kT % 4>(quant, side, xq, prefetch, isum), ...);
}

// The quarters for few rows. Kept out of line: inlined next to the many-row form, it made GCC
// compile the 8-row form slower (16-stream decode 7% slower, alternating runs).
template <int MR>
[[gnu::noinline]] void Q6KFewRowsDots(const uint8_t* quant, const uint8_t* side, int b,
                                      const uint8_t* const* x, bool prefetch, __m512i* isum) {
  for (int n = 0; n < 2; ++n) {
    for (int q = 0; q < 2; ++q) Q6KQuarter<MR>(quant, side, n, q, b, x, prefetch, isum);
  }
}

// acc[r] += the sum of the super-block whose quant part is at `quant` (its side part is the
// kKSideBytes before it) for rows x[0 .. MR) (block b of each row).
template <int MR>
void Q6KSuperBlock(const uint8_t* quant, int b, const uint8_t* const* x, bool prefetch,
                   float (*acc)[kLanes]) {
  const uint8_t* side = quant - kKSideBytes;
  if (prefetch && MR <= kSidePrefetchRows) PrefetchLinesAhead(side, kQ6KSidePart);
  __m512i isum[MR];
  for (int r = 0; r < MR; ++r) isum[r] = _mm512_setzero_si512();
  if constexpr (MR <= kQ6KFewRows) {
    Q6KFewRowsDots<MR>(quant, side, b, x, prefetch, isum);
  } else {
    const int8_t* xq[MR];
    for (int r = 0; r < MR; ++r) xq[r] = Quants(x[r], b);
    Q6KSubBlocks<MR>(quant, side, xq, prefetch, isum, std::make_integer_sequence<int, 16>());
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
    const uint8_t* bsums = Bsums(x[r], b);
    __m512i offset = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      offset = DpwssdBcast(offset, scale_pairs[k], bsums + 4 * k);
    }
    const __m512i total = _mm512_sub_epi32(isum[r], _mm512_slli_epi32(offset, 5));
    const __m512 dx = _mm512_set1_ps(Dx(x[r], b));
    const __m512 block =
        Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(total), Rounded(_mm512_mul_ps(d, dx))));
    _mm512_store_ps(acc[r], Rounded(_mm512_add_ps(_mm512_load_ps(acc[r]), block)));
  }
}

// ---- the tile ----

template <GgmlType T, int MR>
void SuperBlockRows(const uint8_t* quant, int b, const uint8_t* const* x, bool prefetch,
                    float (*acc)[kLanes]) {
  if constexpr (T == GgmlType::kQ6_K) {
    Q6KSuperBlock<MR>(quant, b, x, prefetch, acc);
  } else {
    K4SuperBlock<T == GgmlType::kQ5_K, MR>(quant, b, x, prefetch, acc);
  }
}

// Rows x[0 .. mr) with mr (1 .. kMr) fixed at compile time.
template <GgmlType T, int MR = 1>
void SuperBlockRowsOf(int mr, const uint8_t* quant, int b, const uint8_t* const* x, bool prefetch,
                      float (*acc)[kLanes]) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return SuperBlockRows<T, MR>(quant, b, x, prefetch, acc);
    SuperBlockRowsOf<T, MR + 1>(mr, quant, b, x, prefetch, acc);
  }
}

// Rows [i0, i0 + n_rows) (n_rows <= kPassRows) of the outputs j0 .. j0 + 15 of one group.
// kPrefetch: the first chunk of rows prefetches the weights ahead (software); else the hardware
// prefetchers alone.
template <GgmlType T, bool kPrefetch>
void GroupPass(const MatmulTile& t, const uint8_t* group, int i0, int n_rows, int j0) {
  constexpr size_t kStride = T == GgmlType::kQ6_K   ? kQ6KStride
                             : T == GgmlType::kQ5_K ? kQ5KStride
                                                    : kQ4KStride;
  const uint8_t* x[kPassRows];
  for (int r = 0; r < n_rows; ++r) x[r] = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
  alignas(64) float acc[kPassRows][kLanes] = {};
  for (int b = 0; b < t.k / 256; ++b) {
    const uint8_t* quant = group + kStride * static_cast<size_t>(b) + kKSideBytes;
    for (int c = 0; c < n_rows; c += kMr) {
      SuperBlockRowsOf<T>(std::min(kMr, n_rows - c), quant, b, x + c, kPrefetch && c == 0, acc + c);
    }
  }
  const __mmask16 mask = StoreMask(j0, t.n_end);
  for (int r = 0; r < n_rows; ++r) {
    _mm512_mask_storeu_ps(t.y + static_cast<size_t>(i0 + r) * t.ldy + j0, mask,
                          _mm512_load_ps(acc[r]));
  }
}

template <GgmlType T, bool kPrefetch = true>
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
    for (int i0 = 0; i0 < t.m; i0 += kPassRows) {
      GroupPass<T, kPrefetch>(t, group, i0, std::min(kPassRows, t.m - i0), j0);
    }
  }
}

}  // namespace

void MatmulQ4_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ4_K>(t); }
void MatmulQ5_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ5_K>(t); }
void MatmulQ6_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ6_K>(t); }
void MatmulQ4_Kx16NoPrefetch(const MatmulTile& t) { MatmulKx16<GgmlType::kQ4_K, false>(t); }
void MatmulQ5_Kx16NoPrefetch(const MatmulTile& t) { MatmulKx16<GgmlType::kQ5_K, false>(t); }
void MatmulQ6_Kx16NoPrefetch(const MatmulTile& t) { MatmulKx16<GgmlType::kQ6_K, false>(t); }

}  // namespace kvserve::avx512
