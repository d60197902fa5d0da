// AVX2 tiles for Q8_0 / Q4_0 weights against Q8_0 activations.
//
// Accumulation order of y[i][j] (the determinism contract of kernels.h): blocks in order; for a
// block, 8 exact int32 partial sums (lane l covers elements 4l .. 4l + 3) are converted to float
// and fused-multiply-added, times dw * dx of the block, into one 8-lane float accumulator. After
// the last block the lanes are added by HSum's fixed tree. Nothing depends on m, on the n range, or
// on the tile shape.
//
// Integer products: vpmaddubsw multiplies unsigned by signed bytes into saturating int16 pairs.
// Q8_0 uses the sign trick, |w| * (x * sign(w)), whose pairs stay within +-2 * 128 * 127; it needs
// activation quants in [-127, 127], which is what quantize_row_q8_0 produces (|x / d| <= 127).
// Q4_0 uses the raw nibble u = w + 8 in [0, 15] and subtracts 8 * (pair sum of x) per int16 lane.
#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/quant_matmul.h"
#include "kernels/tile_walk.h"

namespace kvserve::avx2 {

namespace {

// Register tile for m > 1 (8 accumulators) and for m == 1 (4 weight rows side by side).
constexpr int kMr = 2;
constexpr int kNr = 4;
constexpr int kNrDecode = 4;

inline float HSum(__m256 v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline float ScaleOf(const uint8_t* block) {
  uint16_t s;
  std::memcpy(&s, block, sizeof(s));
  return _cvtsh_ss(s);
}

enum class QType { kQ8_0, kQ4_0 };

template <QType Q>
constexpr size_t kBlockBytes = Q == QType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);

// One weight block prepared for the int8 products against any activation block.
struct WBlock {
  __m256i a;  // Q8_0: |w|; Q4_0: w + 8 (both unsigned bytes)
  __m256i s;  // Q8_0: w (its signs are applied to x); unused for Q4_0
  __m256 d;   // dw in every lane
};

template <QType Q>
inline WBlock LoadWBlock(const uint8_t* block) {
  WBlock wb;
  if constexpr (Q == QType::kQ8_0) {
    wb.s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    wb.a = _mm256_abs_epi8(wb.s);
  } else {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i low = _mm_set1_epi8(0x0f);
    wb.a = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low), _mm_and_si128(q, low));
    wb.s = _mm256_setzero_si256();
  }
  wb.d = _mm256_set1_ps(ScaleOf(block));
  return wb;
}

// One activation block: its quants, its scale, and (Q4_0) 8 * the sum of each int16 pair.
struct XBlock {
  __m256i q;
  __m256i corr;
  __m256 d;
};

template <QType Q>
inline XBlock LoadXBlock(const uint8_t* block) {
  XBlock xb;
  xb.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  xb.corr =
      Q == QType::kQ4_0 ? _mm256_maddubs_epi16(_mm256_set1_epi8(8), xb.q) : _mm256_setzero_si256();
  xb.d = _mm256_set1_ps(ScaleOf(block));
  return xb;
}

template <QType Q>
inline __m256i BlockDot(const WBlock& w, const XBlock& x) {
  __m256i pairs;
  if constexpr (Q == QType::kQ8_0) {
    pairs = _mm256_maddubs_epi16(w.a, _mm256_sign_epi8(x.q, w.s));
  } else {
    pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(w.a, x.q), x.corr);
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <QType Q, int MR, int NR>
void QuantTile(const MatmulTile& t, int i0, int j0) {
  const int n_blocks = t.k / 32;
  const uint8_t* w[NR];
  const uint8_t* x[MR];
  for (int c = 0; c < NR; ++c) w[c] = t.w + static_cast<size_t>(j0 + c) * t.w_row_bytes;
  for (int r = 0; r < MR; ++r) x[r] = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  for (int b = 0; b < n_blocks; ++b) {
    XBlock xb[MR];
    for (int r = 0; r < MR; ++r) xb[r] = LoadXBlock<Q>(x[r] + sizeof(BlockQ8_0) * b);
    for (int c = 0; c < NR; ++c) {
      const WBlock wb = LoadWBlock<Q>(w[c] + kBlockBytes<Q> * b);
      for (int r = 0; r < MR; ++r) {
        const __m256 isum = _mm256_cvtepi32_ps(BlockDot<Q>(wb, xb[r]));
        acc[r][c] = _mm256_fmadd_ps(isum, _mm256_mul_ps(wb.d, xb[r].d), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* y = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
    for (int c = 0; c < NR; ++c) y[c] = HSum(acc[r][c]);
  }
}

template <QType Q, int NR>
void QuantTileRows(const MatmulTile& t, int i0, int mr, int j0) {
  switch (mr) {
    case 1:
      return QuantTile<Q, 1, NR>(t, i0, j0);
    case 2:
      return QuantTile<Q, 2, NR>(t, i0, j0);
  }
  assert(false && "QuantTileRows: bad row count");
}

template <QType Q>
void MatmulQuant(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.m >= 0 && t.n_begin <= t.n_end);
  // Activation rows per block, so that the block stays in L2 (Q8_0 rows are 34 bytes per 32).
  const size_t row_bytes = t.x_row_bytes > 0 ? t.x_row_bytes : 1;
  const int m_block = t.m == 1 ? 1 : static_cast<int>((512u << 10) / row_bytes / kMr * kMr);
  const auto no_repack = [](int, int) {};
  if (t.m == 1) {
    WalkTiles<1, kNrDecode>(1, t.n_begin, t.n_end, 1, no_repack, [&](int i0, int, int j0, int nr) {
      if (nr == kNrDecode) {
        QuantTile<Q, 1, kNrDecode>(t, i0, j0);
      } else {
        QuantTile<Q, 1, 1>(t, i0, j0);
      }
    });
    return;
  }
  WalkTiles<kMr, kNr>(t.m, t.n_begin, t.n_end, m_block, no_repack,
                      [&](int i0, int mr, int j0, int nr) {
                        if (nr == kNr) {
                          QuantTileRows<Q, kNr>(t, i0, mr, j0);
                        } else {
                          QuantTileRows<Q, 1>(t, i0, mr, j0);
                        }
                      });
}

}  // namespace

void MatmulQ8_0(const MatmulTile& t) { MatmulQuant<QType::kQ8_0>(t); }
void MatmulQ4_0(const MatmulTile& t) { MatmulQuant<QType::kQ4_0>(t); }

}  // namespace kvserve::avx2
