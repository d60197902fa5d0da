// The quantized tiles of the AVX2-class tables, for Q8_0 / Q4_0 weights against Q8_0 activations:
// included by quant_matmul_avx2.cc (AVX2: vpmaddubsw) and quant_matmul_avxvnni.cc (AVX2 + AVX-VNNI:
// vpdpbusd on 256 bits), and by nothing else. Everything is in an anonymous namespace, so each of
// the two translation units gets its own internal copy, compiled with its own instruction set, and
// no code can be merged across ISAs (see kernels_avx512.cc).
//
// Accumulation order of y[i][j]: the AVX-512 tiles' (quant_matmul_avx512.cc), so every table with
// packed kernels gives the same bits. One float lane per output element; block b (in increasing b)
// contributes its exact int32 dot product isum, converted to float, in one fused multiply-add:
//   acc = fma(float(isum), dw_b * dx_b, acc), starting from acc = 0; y = acc.
// A vector holds 8 weight rows, lane = row: half h (rows 8h .. 8h + 7) of a 16-row group of the
// x16 layout (packed_weights.h), whose dword d of 8 rows is 32 contiguous bytes. Matrices in the
// stored layout are packed one group at a time (PackGroups) into a thread-local buffer and then
// computed in the same way.
//
// Exact integer dots:
// - AVX-VNNI: vpdpbusd multiplies unsigned by signed bytes and adds groups of 4 into int32 without
//   saturation. The weights are unsigned by an offset (Q8_0: w + 128, as the x16 layout stores
//   them; Q4_0: the raw nibble, w + 8) and each activation block carries the correction,
//   -offset * (sum of its quants), so the sums are exact for any quants, -128 included.
// - AVX2: vpmaddubsw makes saturating int16 pairs, so the operands are kept where no pair can
//   saturate. Q4_0: the raw nibble u in [0, 15] against x, a pair at most 2 * 15 * 128 = 3840, so
//   the 8 dwords of a block add up in int16 (<= 30720) before one vpmaddwd widens them, and the
//   offset comes back as -8 * (sum of the block's x quants). Q8_0: the sign trick,
//   |w| * (x * sign(w)), pairs within +-2 * 128 * 127, widened per dword; it needs activation
//   quants in [-127, 127], which is what quantize_row_q8_0 produces (|x / d| <= 127).
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "quant_tiles_avx2.h is for the AVX2-class translation units only"
#endif

#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/scratch_buffer.h"

namespace kvserve {
namespace {

#if defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

constexpr int kLanes = 8;       // weight rows per vector: one half of a group
constexpr int kGroupRows = 16;  // rows of an x16 group
// Activation rows per register tile (m > 1); one row (decode) computes both halves at once.
constexpr int kMr = 4;
static_assert(kPrefetchLevelRows <= kMr);
// Activation rows per block: about this many bytes, so the block stays in L2.
constexpr size_t kXBlockBytes = 512 << 10;

enum class QType { kQ8_0, kQ4_0 };

template <QType Q>
constexpr GgmlType kType = Q == QType::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
// Quant bytes of one block of a group (x16 layout).
template <QType Q>
constexpr size_t kQuantBytes = Q == QType::kQ8_0 ? 8 * 64 : 4 * 64;

// Scratch (MatmulTile::scratch): x = activation block infos, w = one packed weight group.

inline float ScaleOf(const uint8_t* block) {
  uint16_t s;
  std::memcpy(&s, block, sizeof(s));
  return _cvtsh_ss(s);
}

inline int32_t LoadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// What the tiles need of one activation block besides its quants.
struct XInfo {
  float dx;      // the block's scale
  int32_t corr;  // -offset * (sum of the block's quants); 0 for Q8_0 without VNNI (sign trick)
};

// The weights' unsigned offset in the products (see the top of this file).
template <QType Q>
constexpr int32_t kOffset = Q == QType::kQ4_0 ? 8 : (kVnni ? 128 : 0);

template <QType Q>
void PrepareRow(const uint8_t* x, int n_blocks, XInfo* out) {
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* block = x + sizeof(BlockQ8_0) * b;
    out[b].dx = ScaleOf(block);
    out[b].corr = 0;
    if constexpr (kOffset<Q> != 0) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      const __m256i quads =
          _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
      out[b].corr = -kOffset<Q> * _mm_cvtsi128_si32(s);
    }
  }
}

// Dword D (0 .. 7: elements 4D .. 4D + 3) of half h of a packed block: in *unsigned_w the bytes
// for the unsigned operand (Q4_0: the raw nibbles; Q8_0: w + 128 with VNNI, |w| without), and
// without VNNI w itself in *signed_w (Q8_0's sign trick).
template <QType Q>
inline void LoadDword(const uint8_t* quants, int h, int D, __m256i* unsigned_w, __m256i* signed_w) {
  if constexpr (Q == QType::kQ4_0) {
    const __m256i g =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 64 * (D % 4) + 32 * h));
    const __m256i low = _mm256_set1_epi8(0x0f);
    *unsigned_w = D < 4 ? _mm256_and_si256(g, low) : _mm256_and_si256(_mm256_srli_epi16(g, 4), low);
  } else {
    const __m256i g = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + 64 * D + 32 * h));
    if constexpr (kVnni) {
      *unsigned_w = g;
    } else {
      *signed_w = _mm256_xor_si256(g, _mm256_set1_epi8(static_cast<char>(0x80)));
      *unsigned_w = _mm256_abs_epi8(*signed_w);
    }
  }
}

// sum += the exact products of one dword, lane = row: int32 sums of 4 with VNNI; without, Q4_0's
// int16 pair sums (widened once per block) and Q8_0's int32 sums of 4.
template <QType Q>
inline __m256i AddDword(__m256i sum, __m256i unsigned_w, __m256i signed_w, __m256i x) {
#if defined(__AVXVNNI__)
  (void)signed_w;
  return _mm256_dpbusd_avx_epi32(sum, unsigned_w, x);
#else
  if constexpr (Q == QType::kQ4_0) {
    (void)signed_w;
    return _mm256_add_epi16(sum, _mm256_maddubs_epi16(unsigned_w, x));
  } else {
    const __m256i pairs = _mm256_maddubs_epi16(unsigned_w, _mm256_sign_epi8(x, signed_w));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
#endif
}

// Activation rows x[0 .. MR) (Q8_0 rows, with their XInfo) against halves [h0, h0 + NH) of one
// packed group; y[r] + 8 h gets half h's outputs, its first valid[h] lanes only.
template <QType Q, int MR, int NH, PrefetchLevel L = PrefetchLevel::kL1>
void GroupTile(const uint8_t* group, int n_blocks, int h0, const uint8_t* const* x,
               const XInfo* const* info, float* const* y, const int* valid) {
  const BlockBundles bundles = PackedBundles(kQuantBytes<Q>, n_blocks);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 acc[NH][MR];
  for (int h = 0; h < NH; ++h) {
    for (int r = 0; r < MR; ++r) acc[h][r] = _mm256_setzero_ps();
  }
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    if (h0 == 0) PrefetchLinesAhead<L>(quants, bundles.StreamBytes(b));
    __m256i sums[NH][MR];  // AddDword's sums; with VNNI they start from the correction
    for (int h = 0; h < NH; ++h) {
      for (int r = 0; r < MR; ++r) {
        sums[h][r] = kVnni ? _mm256_set1_epi32(info[r][b].corr) : _mm256_setzero_si256();
      }
    }
    for (int D = 0; D < 8; ++D) {
      __m256i xd[MR];
      for (int r = 0; r < MR; ++r) {
        xd[r] = _mm256_set1_epi32(LoadI32(x[r] + sizeof(BlockQ8_0) * b + 2 + 4 * D));
      }
      for (int h = 0; h < NH; ++h) {
        __m256i unsigned_w, signed_w = _mm256_setzero_si256();
        LoadDword<Q>(quants, h0 + h, D, &unsigned_w, &signed_w);
        for (int r = 0; r < MR; ++r) {
          sums[h][r] = AddDword<Q>(sums[h][r], unsigned_w, signed_w, xd[r]);
        }
      }
    }
    for (int h = 0; h < NH; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(
          reinterpret_cast<const __m128i*>(group + bundles.SideOffset(b) + 16 * (h0 + h))));
      for (int r = 0; r < MR; ++r) {
        const XInfo& xi = info[r][b];
        __m256i isum = sums[h][r];
        if constexpr (!kVnni && Q == QType::kQ4_0) {
          isum = _mm256_add_epi32(_mm256_madd_epi16(isum, ones16), _mm256_set1_epi32(xi.corr));
        }
        acc[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                    _mm256_mul_ps(dw, _mm256_set1_ps(xi.dx)), acc[h][r]);
      }
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int h = 0; h < NH; ++h) {
    const int n_valid = valid[h0 + h];
    if (n_valid <= 0) continue;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), lane);
    for (int r = 0; r < MR; ++r) _mm256_maskstore_ps(y[r] + kLanes * (h0 + h), mask, acc[h][r]);
  }
}

// Rows [i0, i0 + MR) of the current activation block against group j0.
template <QType Q, int MR, PrefetchLevel L = PrefetchLevel::kL1>
void GroupTileRows(const MatmulTile& t, const uint8_t* group, const XInfo* info_block, int n_blocks,
                   int m0, int i0, int j0) {
  const uint8_t* x[MR];
  const XInfo* info[MR];
  float* y[MR];
  for (int r = 0; r < MR; ++r) {
    x[r] = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
    info[r] = info_block + static_cast<size_t>(i0 + r - m0) * n_blocks;
    y[r] = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
  }
  const int valid[2] = {t.n_end - j0, t.n_end - j0 - kLanes};
  if constexpr (MR == 1) {
    GroupTile<Q, 1, 2, L>(group, n_blocks, 0, x, info, y, valid);
  } else {
    GroupTile<Q, MR, 1, L>(group, n_blocks, 0, x, info, y, valid);
    GroupTile<Q, MR, 1, L>(group, n_blocks, 1, x, info, y, valid);
  }
}

// The tile of rows [i0, i0 + mr) with mr (1 .. kMr) fixed at compile time.
template <QType Q, PrefetchLevel L, int MR = 1>
void GroupTileRowsOf(int mr, const MatmulTile& t, const uint8_t* group, const XInfo* info_block,
                     int n_blocks, int m0, int i0, int j0) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return GroupTileRows<Q, MR, L>(t, group, info_block, n_blocks, m0, i0, j0);
    GroupTileRowsOf<Q, L, MR + 1>(mr, t, group, info_block, n_blocks, m0, i0, j0);
  }
}

// kPacked: t.w is a packed matrix (packed_weights.h), t.w_row_bytes the bytes of one 16-row group
// and t.n_begin a multiple of 16; otherwise the stored layout. L: where the tiles of up to
// kPrefetchLevelRows activation rows prefetch (prefetch_ahead.h); more rows take the L1 tiles.
template <QType Q, bool kPacked, PrefetchLevel L = PrefetchLevel::kL1>
void MatmulQuant(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.m >= 0 && t.n_begin <= t.n_end);
  assert(!kPacked || t.n_begin % kGroupRows == 0);
  if (t.m == 0 || t.n_begin == t.n_end || t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  const int n_blocks = t.k / 32;
  const size_t row_bytes = t.x_row_bytes + sizeof(XInfo) * static_cast<size_t>(n_blocks);
  int m_block = static_cast<int>(kXBlockBytes / row_bytes / kMr * kMr);
  if (m_block < kMr) m_block = kMr;
  const int rows_per_block = t.m < m_block ? t.m : m_block;
  XInfo* info = static_cast<XInfo*>(t.scratch->x.Get(
      sizeof(XInfo) * static_cast<size_t>(rows_per_block) * static_cast<size_t>(n_blocks)));
  assert(info != nullptr);
  uint8_t* packed_group = nullptr;
  if constexpr (!kPacked) {
    packed_group = static_cast<uint8_t*>(t.scratch->w.Get(PackedGroupBytes(kType<Q>, t.k)));
    assert(packed_group != nullptr);
  }
  for (int m0 = 0; m0 < t.m; m0 += m_block) {
    const int m1 = t.m - m0 < m_block ? t.m : m0 + m_block;
    for (int i = m0; i < m1; ++i) {
      PrepareRow<Q>(t.x + static_cast<size_t>(i) * t.x_row_bytes, n_blocks,
                    info + static_cast<size_t>(i - m0) * n_blocks);
    }
    for (int j0 = t.n_begin; j0 < t.n_end; j0 += kGroupRows) {
      const uint8_t* group = packed_group;
      if constexpr (kPacked) {
        group = t.w + static_cast<size_t>(j0 / kGroupRows) * t.w_row_bytes;
      } else {
        // Rows past n_end are zero in the packed group: computed, never stored.
        PackGroups(kType<Q>, t.w + static_cast<size_t>(j0) * t.w_row_bytes, t.w_row_bytes,
                   t.n_end - j0, t.k, 0, 1, packed_group);
      }
      if (L != PrefetchLevel::kL1 && m1 - m0 <= kPrefetchLevelRows) {
        GroupTileRowsOf<Q, L>(m1 - m0, t, group, info, n_blocks, m0, m0, j0);
        continue;
      }
      for (int i = m0; i < m1; i += kMr) {
        GroupTileRowsOf<Q, PrefetchLevel::kL1>(m1 - i < kMr ? m1 - i : kMr, t, group, info,
                                               n_blocks, m0, i, j0);
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
