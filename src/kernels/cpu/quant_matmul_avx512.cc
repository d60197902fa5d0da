// AVX-512 VNNI tiles for Q8_0 / Q4_0 weights against Q8_0 activations.
//
// Accumulation order of y[i][j] (the determinism contract of kernels.h): one float lane per output
// element. Block b (in increasing b) contributes its exact int32 dot product isum (the order of the
// integer additions cannot matter), converted to float, in one fused multiply-add:
//   acc = fma(float(isum), dw_b * dx_b, acc), starting from acc = 0; y = acc.
// Both paths below compute exactly this, with 16 weight rows in the 16 lanes of a vector; they only
// differ in how they get the exact integer dots. Nothing depends on m, on the n range, or on the
// tile shape (rows past n_end are computed from a clamped row and never stored).
//
// The sign trick: vpdpbusd multiplies unsigned by signed bytes. The weights are made unsigned by an
// offset (Q8_0: w + 128, as w ^ 0x80; Q4_0: the raw nibble, w + 8) and the activation side carries
// the correction, -offset * (sum of the activation quants), so the integer sums are exact for any
// quants, -128 included.
//
// - Packed matrices (the x16 layout of packed_weights.h, made at load): dword d of 16 rows side by
//   side, so 8 vpdpbusd per block against broadcast activation dwords give the 16 block sums
//   directly, for any m, reading one contiguous stream.
// - Stored layout, m == 1: each weight row's block pair is multiplied in its natural layout (16
//   int32 lanes, 8 per block), and a permute-add tree turns 16 rows of those into one vector of
//   block sums per block, lane = row.
// - Stored layout, m > 1: each group of 16 rows is packed once (gathers) into a thread-local
//   buffer and then computed as a packed group, reused for every activation row.
#include "kernels/cpu/immintrin_avx512.h"

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/cpu/x16_helpers_avx512.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = kX16Lanes;  // weight rows per vector
// Activation rows per register tile (m > 1): 16 accumulators and 8 weight dwords fit the 32
// registers, and 16 concurrent streams (or a 16-token chunk) read each group's weights once, which
// made a 16-stream tinyllama Q4_0 decode step ~11% faster than tiles of 8 rows.
constexpr int kMr = 16;
// Repacked activation rows per block: about this many bytes, so the block stays in L2.
constexpr size_t kXBlockBytes = 512 << 10;

// Two consecutive Q8_0 activation blocks, repacked. 192 bytes.
struct alignas(64) XPair {
  int8_t q[64];           // quants of block 2p, then of block 2p + 1 (zeros if absent)
  int32_t neg_corr[16];   // per lane: -offset * (sum of the lane's 4 quants)
  float dx[2];            // scales of the two blocks (0 if absent)
  int32_t block_corr[2];  // -offset * (sum of the block's quants)
  int32_t pad[12];
};
static_assert(sizeof(XPair) == 192);

// Scratch (MatmulTile::scratch): x = repacked activation rows, w = one transposed weight group.

inline float F16ToF32(const uint8_t* p) {
  uint16_t s;
  std::memcpy(&s, p, sizeof(s));
  return _cvtsh_ss(s);
}

enum class QType { kQ8_0, kQ4_0 };

template <QType Q>
constexpr size_t kBlockBytes = Q == QType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
template <QType Q>
constexpr int kOffset = Q == QType::kQ8_0 ? 128 : 8;

// Repacks activation row x (n_blocks Q8_0 blocks) into (n_blocks + 1) / 2 pairs.
template <QType Q>
void RepackRow(const uint8_t* x, int n_blocks, XPair* out) {
  const __m512i offset_bytes = _mm512_set1_epi8(static_cast<char>(kOffset<Q>));
  for (int p = 0; 2 * p < n_blocks; ++p) {
    const uint8_t* b0 = x + sizeof(BlockQ8_0) * (2 * p);
    const uint8_t* b1 = b0 + sizeof(BlockQ8_0);
    const bool has_b1 = 2 * p + 1 < n_blocks;
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
    const __m256i hi = has_b1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2))
                              : _mm256_setzero_si256();
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i neg = _mm512_sub_epi32(
        _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset_bytes, q));
    _mm512_store_si512(out[p].q, q);
    _mm512_store_si512(out[p].neg_corr, neg);
    out[p].block_corr[0] = _mm512_mask_reduce_add_epi32(0x00ff, neg);
    out[p].block_corr[1] = _mm512_mask_reduce_add_epi32(0xff00, neg);
    out[p].dx[0] = F16ToF32(b0);
    out[p].dx[1] = has_b1 ? F16ToF32(b1) : 0.0f;
    for (int i = 0; i < 12; ++i) out[p].pad[i] = 0;
  }
}

// The block step shared by both paths: acc = fma(float(isum), dw * dx, acc), lane = weight row.
inline __m512 BlockStep(__m512i isum, __m512 dw, float dx, __m512 acc) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc);
}

// dw of block b of the 16 rows at row_offsets from w (f16, exact as float).
template <QType Q>
inline __m512 GatherScales(const uint8_t* w, __m512i row_offsets, int b) {
  const __m512i words =
      _mm512_i32gather_epi32(row_offsets, w + kBlockBytes<Q> * static_cast<size_t>(b), 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// Row offsets (bytes from the group's first row) of the 16 rows of group j0, rows past n_end
// clamped to the last valid one (their lanes are computed but never stored).
inline __m512i RowOffsets(int j0, int n_end, size_t row_bytes) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i rows = _mm512_min_epi32(lane, _mm512_set1_epi32(n_end - 1 - j0));
  return _mm512_mullo_epi32(rows, _mm512_set1_epi32(static_cast<int>(row_bytes)));
}

// ---- m == 1 ----

// Weight pair p of row w as unsigned bytes in element order: block 2p, then block 2p + 1 (zero if
// kHalf).
template <QType Q, bool kHalf>
inline __m512i LoadWPair(const uint8_t* w, int p) {
  const uint8_t* b0 = w + kBlockBytes<Q> * (2 * p);
  const uint8_t* b1 = b0 + kBlockBytes<Q>;
  if constexpr (Q == QType::kQ8_0) {
    const __m256i hi = kHalf ? _mm256_setzero_si256()
                             : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2));
    const __m512i q = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2))), hi,
        1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2));
    const __m128i q1 =
        kHalf ? _mm_setzero_si128() : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + 2));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(q0)),
                                         _mm256_broadcastsi128_si256(q1), 1);
    // 128-bit lanes: low nibbles of block 2p (elements 0-15), its high nibbles (16-31), then the
    // same for block 2p + 1.
    constexpr int64_t kFour = 0x0004000400040004;
    const __m512i shifts = _mm512_set_epi64(kFour, kFour, 0, 0, kFour, kFour, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi16(q, shifts), _mm512_set1_epi8(0x0f));
  }
}

// Adds adjacent lane pairs of a (into lanes 0-7) and of b (into lanes 8-15).
inline __m512i PairAdd(__m512i a, __m512i b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                          _mm512_permutex2var_epi32(a, odd, b));
}

// Pair p for the 16 rows: the exact block sums of block 2p (*sa) and 2p + 1 (*sb), lane = row.
template <QType Q, bool kHalf>
inline void PairSums(const uint8_t* const* w, const XPair& xp, int p, __m512i* sa, __m512i* sb) {
  const __m512i xq = _mm512_load_si512(xp.q);
  const __m512i nc = _mm512_load_si512(xp.neg_corr);
  __m512i v[8];
  for (int l = 0; l < 8; ++l) {
    // Lanes 0-7: block 2p of row 2l, lanes 8-15 of row 2l + 1 ... after one PairAdd: 4 lanes each.
    v[l] = PairAdd(_mm512_dpbusd_epi32(nc, LoadWPair<Q, kHalf>(w[2 * l], p), xq),
                   _mm512_dpbusd_epi32(nc, LoadWPair<Q, kHalf>(w[2 * l + 1], p), xq));
  }
  for (int l = 0; l < 4; ++l) v[l] = PairAdd(v[2 * l], v[2 * l + 1]);
  for (int l = 0; l < 2; ++l) v[l] = PairAdd(v[2 * l], v[2 * l + 1]);
  // v[0]: rows 0-7 as (block 2p, block 2p + 1) lane pairs; v[1]: rows 8-15.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  *sa = _mm512_permutex2var_epi32(v[0], even, v[1]);
  *sb = _mm512_permutex2var_epi32(v[0], odd, v[1]);
}

template <QType Q>
void DecodeGroup(const MatmulTile& t, const XPair* x, int j0) {
  const int n_blocks = t.k / 32;
  const uint8_t* base = t.w + static_cast<size_t>(j0) * t.w_row_bytes;
  const uint8_t* w[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const int row = j0 + l < t.n_end ? j0 + l : t.n_end - 1;
    w[l] = t.w + static_cast<size_t>(row) * t.w_row_bytes;
  }
  const __m512i offsets = RowOffsets(j0, t.n_end, t.w_row_bytes);
  __m512 acc = _mm512_setzero_ps();
  const int full_pairs = n_blocks / 2;
  for (int p = 0; p < full_pairs; ++p) {
    __m512i sa, sb;
    PairSums<Q, false>(w, x[p], p, &sa, &sb);
    acc = BlockStep(sa, GatherScales<Q>(base, offsets, 2 * p), x[p].dx[0], acc);
    acc = BlockStep(sb, GatherScales<Q>(base, offsets, 2 * p + 1), x[p].dx[1], acc);
  }
  if (n_blocks % 2 != 0) {
    __m512i sa, sb;
    PairSums<Q, true>(w, x[full_pairs], full_pairs, &sa, &sb);
    acc = BlockStep(sa, GatherScales<Q>(base, offsets, 2 * full_pairs), x[full_pairs].dx[0], acc);
  }
  _mm512_mask_storeu_ps(t.y + j0, StoreMask(j0, t.n_end), acc);
}

// ---- m > 1 ----

template <QType Q>
constexpr size_t kQuantBytes = Q == QType::kQ8_0 ? 8 * 64 : 4 * 64;

// Packs the 16 rows of group j0 of the stored matrix into `out`, in the x16 layout of
// packed_weights.h (gathers; rows past n_end are clamped copies, never stored).
template <QType Q>
void TransposeGroup(const MatmulTile& t, int j0, uint8_t* out) {
  const int n_blocks = t.k / 32;
  const uint8_t* base = t.w + static_cast<size_t>(j0) * t.w_row_bytes;
  const __m512i offsets = RowOffsets(j0, t.n_end, t.w_row_bytes);
  const BlockBundles bundles = PackedBundles(kQuantBytes<Q>, n_blocks);
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* block = base + kBlockBytes<Q> * static_cast<size_t>(b);
    uint8_t* quants = out + bundles.QuantsOffset(b);
    for (int d = 0; d < (Q == QType::kQ8_0 ? 8 : 4); ++d) {
      __m512i g = _mm512_i32gather_epi32(offsets, block + 2 + 4 * d, 1);
      if constexpr (Q == QType::kQ8_0) g = _mm512_xor_si512(g, _mm512_set1_epi8(-128));
      _mm512_store_si512(quants + 64 * d, g);
    }
    const __m512i words = _mm512_i32gather_epi32(offsets, block, 1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + bundles.SideOffset(b)),
                       _mm512_cvtepi32_epi16(words));
  }
}

// The 8 unsigned weight dwords of block `quants` of a packed group, lane = row: wq[d] holds
// elements 4d .. 4d + 3 of every row.
template <QType Q>
inline void LoadPackedBlock(const uint8_t* quants, __m512i wq[8]) {
  if constexpr (Q == QType::kQ8_0) {
    for (int d = 0; d < 8; ++d) wq[d] = _mm512_load_si512(quants + 64 * d);
  } else {
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int d = 0; d < 4; ++d) {
      const __m512i g = _mm512_load_si512(quants + 64 * d);
      wq[d] = _mm512_and_si512(g, low);
      wq[4 + d] = _mm512_and_si512(_mm512_srli_epi32(g, 4), low);
    }
  }
}

// Activation rows x[0 .. MR) against one packed group; y[r] gets the group's 16 outputs.
// GroupTile for one activation row of Q4_0 (decode): the high nibbles are multiplied in place,
// masked with 0xf0 (16 x nibble), and their exact sum is shifted back by 4 bits, which saves the
// shift of every unpacked dword; the block sum, and so the result, is the same integer.
template <PrefetchLevel L>
void Q4DecodeTile(const uint8_t* group, int n_blocks, const XPair* x, float* y, __mmask16 mask) {
  const BlockBundles bundles = PackedBundles(kQuantBytes<QType::kQ4_0>, n_blocks);
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i high = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512 acc = _mm512_setzero_ps();
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(group + bundles.SideOffset(b))));
    const XPair& xp = x[b / 2];
    const int8_t* xq = xp.q + 32 * (b % 2);
    __m512i s_low = _mm512_set1_epi32(xp.block_corr[b % 2]);
    __m512i s_high16 = _mm512_setzero_si512();
    PrefetchLinesAhead<L>(quants, bundles.StreamBytes(b));
    for (int d = 0; d < 4; ++d) {
      const __m512i g = _mm512_load_si512(quants + 64 * d);
      s_low = DpbusdBcast(s_low, _mm512_and_si512(g, low), xq + 4 * d);
      s_high16 = DpbusdBcast(s_high16, _mm512_and_si512(g, high), xq + 16 + 4 * d);
    }
    const __m512i isum = _mm512_add_epi32(s_low, _mm512_srai_epi32(s_high16, 4));
    acc = BlockStep(isum, dw, xp.dx[b % 2], acc);
  }
  _mm512_mask_storeu_ps(y, mask, acc);
}

template <QType Q, int MR, PrefetchLevel L = PrefetchLevel::kL1>
void GroupTile(const uint8_t* group, int n_blocks, const XPair* const* x, float* const* y,
               __mmask16 mask) {
  if constexpr (Q == QType::kQ4_0 && MR == 1) {
    return Q4DecodeTile<L>(group, n_blocks, x[0], y[0], mask);
  }
  const BlockBundles bundles = PackedBundles(kQuantBytes<Q>, n_blocks);
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < n_blocks; ++b) {
    __m512i wq[8];
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    PrefetchLinesAhead<L>(quants, bundles.StreamBytes(b));
    LoadPackedBlock<Q>(quants, wq);
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(group + bundles.SideOffset(b))));
    const int p = b / 2, h = b % 2;
    for (int r = 0; r < MR; ++r) {
      const XPair& xp = x[r][p];
      const int8_t* xq = xp.q + 32 * h;
      __m512i s0 = _mm512_set1_epi32(xp.block_corr[h]);
      __m512i s1 = _mm512_setzero_si512();
      for (int d = 0; d < 4; ++d) {
        s0 = DpbusdBcast(s0, wq[d], xq + 4 * d);
        s1 = DpbusdBcast(s1, wq[4 + d], xq + 16 + 4 * d);
      }
      acc[r] = BlockStep(_mm512_add_epi32(s0, s1), dw, xp.dx[h], acc[r]);
    }
  }
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y[r], mask, acc[r]);
}

template <QType Q, int MR, PrefetchLevel L = PrefetchLevel::kL1>
void GroupTileRows(const MatmulTile& t, const uint8_t* group, const XPair* packed, int n_pairs,
                   int m0, int i0, int j0) {
  const XPair* x[MR];
  float* y[MR];
  for (int r = 0; r < MR; ++r) {
    x[r] = packed + static_cast<size_t>(i0 + r - m0) * n_pairs;
    y[r] = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
  }
  GroupTile<Q, MR, L>(group, t.k / 32, x, y, StoreMask(j0, t.n_end));
}

// The tile of rows [i0, i0 + mr) with mr (1 .. kMr) fixed at compile time.
template <QType Q, PrefetchLevel L, int MR = 1>
void GroupTileRowsOf(int mr, const MatmulTile& t, const uint8_t* group, const XPair* packed,
                     int n_pairs, int m0, int i0, int j0) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return GroupTileRows<Q, MR, L>(t, group, packed, n_pairs, m0, i0, j0);
    GroupTileRowsOf<Q, L, MR + 1>(mr, t, group, packed, n_pairs, m0, i0, j0);
  }
}

// Activation rows [m0, m1) against one packed group, in register tiles of up to kMr rows. The
// prefetch level applies to up to kPrefetchLevelRows rows (decode, speculation's verify steps);
// more rows take the L1 tiles.
template <QType Q, PrefetchLevel L>
void GroupRows(const MatmulTile& t, const uint8_t* group, const XPair* packed, int n_pairs, int m0,
               int m1, int j0) {
  if (L != PrefetchLevel::kL1 && m1 - m0 <= kPrefetchLevelRows) {
    return GroupTileRowsOf<Q, L>(m1 - m0, t, group, packed, n_pairs, m0, m0, j0);
  }
  for (int i = m0; i < m1; i += kMr) {
    GroupTileRowsOf<Q, PrefetchLevel::kL1>(m1 - i < kMr ? m1 - i : kMr, t, group, packed, n_pairs,
                                           m0, i, j0);
  }
}

// kPacked: t.w is a packed matrix (packed_weights.h), t.w_row_bytes the bytes of one 16-row group
// and t.n_begin a multiple of 16; otherwise the stored layout.
template <QType Q, bool kPacked, PrefetchLevel L = PrefetchLevel::kL1>
void MatmulQuant(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.m >= 0 && t.n_begin <= t.n_end);
  assert(!kPacked || t.n_begin % kLanes == 0);
  if (t.m == 0 || t.n_begin == t.n_end || t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  const int n_blocks = t.k / 32;
  const int n_pairs = (n_blocks + 1) / 2;
  const size_t row_bytes = sizeof(XPair) * static_cast<size_t>(n_pairs);
  int m_block = t.m == 1 ? 1 : static_cast<int>(kXBlockBytes / row_bytes / kMr * kMr);
  if (m_block < kMr) m_block = kMr;
  const int rows_per_block = t.m < m_block ? t.m : m_block;
  XPair* packed = static_cast<XPair*>(t.scratch->x.Get(
      sizeof(XPair) * static_cast<size_t>(rows_per_block) * static_cast<size_t>(n_pairs)));
  assert(packed != nullptr);
  if (t.m == 1 && !kPacked) {
    RepackRow<Q>(t.x, n_blocks, packed);
    for (int j0 = t.n_begin; j0 < t.n_end; j0 += kLanes) DecodeGroup<Q>(t, packed, j0);
    return;
  }
  uint8_t* transposed = nullptr;
  if constexpr (!kPacked) {
    transposed = static_cast<uint8_t*>(
        t.scratch->w.Get(PackedBundles(kQuantBytes<Q>, n_blocks).GroupBytes()));
    assert(transposed != nullptr);
  }
  for (int m0 = 0; m0 < t.m; m0 += m_block) {
    const int m1 = t.m - m0 < m_block ? t.m : m0 + m_block;
    for (int i = m0; i < m1; ++i) {
      RepackRow<Q>(t.x + static_cast<size_t>(i) * t.x_row_bytes, n_blocks,
                   packed + static_cast<size_t>(i - m0) * n_pairs);
    }
    for (int j0 = t.n_begin; j0 < t.n_end; j0 += kLanes) {
      const uint8_t* group = transposed;
      if constexpr (kPacked) {
        group = t.w + static_cast<size_t>(j0 / kLanes) * t.w_row_bytes;
      } else {
        TransposeGroup<Q>(t, j0, transposed);
      }
      GroupRows<Q, L>(t, group, packed, n_pairs, m0, m1, j0);
    }
  }
}

}  // namespace

void MatmulQ8_0(const MatmulTile& t) { MatmulQuant<QType::kQ8_0, false>(t); }
void MatmulQ4_0(const MatmulTile& t) { MatmulQuant<QType::kQ4_0, false>(t); }
void MatmulQ8_0x16(const MatmulTile& t) { MatmulQuant<QType::kQ8_0, true>(t); }
void MatmulQ4_0x16(const MatmulTile& t) { MatmulQuant<QType::kQ4_0, true>(t); }
void MatmulQ8_0x16L2(const MatmulTile& t) {
  MatmulQuant<QType::kQ8_0, true, PrefetchLevel::kL2>(t);
}
void MatmulQ4_0x16L2(const MatmulTile& t) {
  MatmulQuant<QType::kQ4_0, true, PrefetchLevel::kL2>(t);
}

}  // namespace kvserve::avx512
