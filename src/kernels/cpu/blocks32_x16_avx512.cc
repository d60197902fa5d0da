// AVX-512 VNNI tiles of Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 matrices in the x16 layout
// (packed_blocks32.h) against their activations (Q8_0 for Q5_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1):
// the scalar tiles' bits (quant_tiles_scalar.cc), for every m and 16-aligned output range.
//
// Lane l is weight row j0 + l. Per block, the weights are made unsigned bytes (Q4_1: the nibble;
// Q5_0/Q5_1: the 5-bit value; IQ4_NL: the table value + 128, MXFP4: the doubled table value + 12
// (0 .. 24), by vpshufb) and vpdpbusd against broadcast activation dwords gives the exact block
// dot; Q5_0's -16, IQ4_NL's -128 and MXFP4's -12 offsets come back as offset * (sum of the block's
// activation quants). MXFP4's d_w is 2^(e - 128) from its E8M0 byte (E8M0Half's bits). The float
// step is the scalar tile's, operation for operation, one lane per row, in increasing block order:
//   Q5_0, IQ4_NL, MXFP4: sum = sum + float(isum) * (d_w * d_x);
//   Q4_1, Q5_1:   sum = sum + (float(isum) * (d_w * d_x) + m_w * s_x).
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "io/ggml_type.h"
#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/packed_blocks32.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/cpu/x16_helpers_avx512.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = kX16Lanes;
constexpr int kMr = 8;  // activation rows per pass over a group's block
static_assert(kPrefetchLevelRows <= kMr);

inline float F16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// The activation format of a weight type: block bytes and field offsets.
template <GgmlType T>
struct Act {
  static constexpr bool kQ8_1 = T == GgmlType::kQ4_1 || T == GgmlType::kQ5_1;
  static constexpr size_t kBytes = kQ8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  static constexpr size_t kQuants =
      kQ8_1 ? offsetof(BlockQ8_1, quants) : offsetof(BlockQ8_0, quants);
};

// The unsigned weights of block b of a group: w[d] elements 4d .. 4d + 3, w[4 + d] 16 + 4d .. .
template <GgmlType T>
inline void LoadWeights(const uint8_t* quant, __m512i w[8]) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int d = 0; d < 4; ++d) {
    const __m512i g = _mm512_loadu_si512(quant + 64 * d);
    w[d] = _mm512_and_si512(g, low);
    w[4 + d] = _mm512_and_si512(_mm512_srli_epi16(g, 4), low);
  }
  if constexpr (T == GgmlType::kQ5_0 || T == GgmlType::kQ5_1) {
    const __m512i qh = _mm512_loadu_si512(quant + 4 * 64);
    const __m512i four = _mm512_set1_epi8(0x10);
    for (int d = 0; d < 4; ++d) {
      w[d] = _mm512_or_si512(w[d], _mm512_and_si512(BitToFour(qh, d), four));
      w[4 + d] = _mm512_or_si512(w[4 + d], _mm512_and_si512(BitToFour(qh, d + 4), four));
    }
  }
  if constexpr (T == GgmlType::kIQ4_NL || T == GgmlType::kMXFP4) {
    alignas(16) int8_t table[16];
    for (int i = 0; i < 16; ++i) {
      table[i] = static_cast<int8_t>(T == GgmlType::kIQ4_NL ? kIq4NlValues[i] + 128
                                                            : kMxfp4Values[i] + 12);
    }
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table)));
    for (int d = 0; d < 8; ++d) w[d] = _mm512_shuffle_epi8(lut, w[d]);
  }
}

// The offset of the unsigned weights: Q5_0 stores q + 16, IQ4_NL's table is shifted by 128,
// MXFP4's by 12.
template <GgmlType T>
constexpr int kOffset = T == GgmlType::kQ5_0     ? 16
                        : T == GgmlType::kIQ4_NL ? 128
                        : T == GgmlType::kMXFP4  ? 12
                                                 : 0;

// The 16 weight scales of a block's side part: f16, or MXFP4's E8M0 bytes as E8M0Half's floats,
// bit for bit: (e - 1) << 23 for e >= 2, 0x00200000 << e below.
template <GgmlType T>
inline __m512 WeightScales(const uint8_t* side) {
  if constexpr (T == GgmlType::kMXFP4) {
    const __m512i e =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(side)));  // 0 .. 255
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, one), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(
        _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(e, one), tiny, normal));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(side)));
  }
}

template <GgmlType T, int MR, PrefetchLevel L = PrefetchLevel::kL1>
void GroupTile(const MatmulTile& t, const uint8_t* group, const int32_t* x_sums, int i0, int j0) {
  const int n_blocks = t.k / 32;
  const BlockBundles bundles = Packed32BundlesOf<T>(n_blocks);
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < n_blocks; ++b) {
    __m512i w[8];
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    const uint8_t* side = group + bundles.SideOffset(b);
    PrefetchLinesAhead<L>(quants, bundles.StreamBytes(b));
    LoadWeights<T>(quants, w);
    const __m512 dw = WeightScales<T>(side);
    for (int r = 0; r < MR; ++r) {
      const uint8_t* xb = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes + Act<T>::kBytes * b;
      const uint8_t* xq = xb + Act<T>::kQuants;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int d = 0; d < 4; ++d) {
        s0 = DpbusdBcast(s0, w[d], xq + 4 * d);
        s1 = DpbusdBcast(s1, w[4 + d], xq + 16 + 4 * d);
      }
      __m512i isum = _mm512_add_epi32(s0, s1);
      if constexpr (kOffset<T> != 0) {
        isum = _mm512_sub_epi32(
            isum, _mm512_set1_epi32(kOffset<T> * x_sums[static_cast<size_t>(r) * n_blocks + b]));
      }
      const __m512 dx = _mm512_set1_ps(F16(xb));
      const __m512 prod =
          Rounded(_mm512_mul_ps(_mm512_cvtepi32_ps(isum), Rounded(_mm512_mul_ps(dw, dx))));
      if constexpr (Act<T>::kQ8_1) {
        const __m512 mw =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(side + 32)));
        const __m512 term =
            Rounded(_mm512_add_ps(prod, Rounded(_mm512_mul_ps(mw, _mm512_set1_ps(F16(xb + 2))))));
        acc[r] = Rounded(_mm512_add_ps(acc[r], term));
      } else {
        acc[r] = Rounded(_mm512_add_ps(acc[r], prod));
      }
    }
  }
  const __mmask16 mask = StoreMask(j0, t.n_end);
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(t.y + static_cast<size_t>(i0 + r) * t.ldy + j0, mask, acc[r]);
  }
}

template <GgmlType T, PrefetchLevel L, int MR = 1>
void GroupTileOf(int mr, const MatmulTile& t, const uint8_t* group, const int32_t* x_sums, int i0,
                 int j0) {
  if constexpr (MR <= kMr) {
    if (mr == MR) return GroupTile<T, MR, L>(t, group, x_sums, i0, j0);
    GroupTileOf<T, L, MR + 1>(mr, t, group, x_sums, i0, j0);
  }
}

// L: where the tiles of up to kPrefetchLevelRows activation rows (decode, speculation's verify
// steps) prefetch; more rows take the L1 tiles.
template <GgmlType T, PrefetchLevel L = PrefetchLevel::kL1>
void MatmulX16(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.n_begin % kLanes == 0 && t.n_begin <= t.n_end);
  if (t.k == 0) {
    for (int i = 0; i < t.m; ++i) {
      for (int j = t.n_begin; j < t.n_end; ++j) t.y[static_cast<size_t>(i) * t.ldy + j] = 0.0f;
    }
    return;
  }
  const int n_blocks = t.k / 32;
  // Σ of each activation block's quants, [m][n_blocks], for the offset types.
  int32_t* x_sums = nullptr;
  if constexpr (kOffset<T> != 0) {
    x_sums = static_cast<int32_t*>(
        t.scratch->x.Get(sizeof(int32_t) * static_cast<size_t>(t.m) * n_blocks));
    assert(x_sums != nullptr);
    ActivationBlockSums(t.x, t.x_row_bytes, Act<T>::kBytes, Act<T>::kQuants, t.m, n_blocks, x_sums);
  }
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += kLanes) {
    const uint8_t* group = t.w + static_cast<size_t>(j0 / kLanes) * t.w_row_bytes;
    if (L != PrefetchLevel::kL1 && t.m <= kPrefetchLevelRows) {
      GroupTileOf<T, L>(t.m, t, group, x_sums, 0, j0);
      continue;
    }
    for (int i0 = 0; i0 < t.m; i0 += kMr) {
      GroupTileOf<T, PrefetchLevel::kL1>(
          std::min(kMr, t.m - i0), t, group,
          x_sums != nullptr ? x_sums + static_cast<size_t>(i0) * n_blocks : nullptr, i0, j0);
    }
  }
}

}  // namespace

void MatmulQ4_1x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ4_1>(t); }
void MatmulQ5_0x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_0>(t); }
void MatmulQ5_1x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_1>(t); }
void MatmulIq4Nlx16(const MatmulTile& t) { MatmulX16<GgmlType::kIQ4_NL>(t); }
void MatmulMxfp4x16(const MatmulTile& t) { MatmulX16<GgmlType::kMXFP4>(t); }
void MatmulQ4_1x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ4_1, PrefetchLevel::kL2>(t); }
void MatmulQ5_0x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_0, PrefetchLevel::kL2>(t); }
void MatmulQ5_1x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_1, PrefetchLevel::kL2>(t); }
void MatmulIq4Nlx16L2(const MatmulTile& t) { MatmulX16<GgmlType::kIQ4_NL, PrefetchLevel::kL2>(t); }
void MatmulMxfp4x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kMXFP4, PrefetchLevel::kL2>(t); }

}  // namespace kvserve::avx512
