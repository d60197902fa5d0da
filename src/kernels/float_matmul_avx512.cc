// AVX-512 float-weight matmul tiles: F32, F16 and BF16 weights against float32 activations.
//
// Accumulation order (the determinism contract of kernels.h): output y[i][j] has one 16-lane
// accumulator; lane l sums W[j][k] * X[i][k] for k = l, l + 16, l + 32, ... in increasing k with
// one fused multiply-add each (the last partial vector is zero-padded), and the 16 lanes are then
// added by HSum's fixed tree. Register tiles only change which accumulators share a loop.
//
// Everything here is in an anonymous namespace and uses intrinsics only (no inline helpers from
// shared headers), so no AVX-512 code can leak into other translation units through COMDAT folding.
// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsic headers as
// uninitialized (GCC bug 105593); the warnings point into the header, so silence them there only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cassert>
#include <cstdint>

#include "kernels/float_matmul.h"
#include "kernels/tile_walk.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = 16;
// Register tile for m > 1: 6 activation rows x 4 weight rows = 24 zmm accumulators.
constexpr int kMr = 6;
constexpr int kNr = 4;
// Register tile for m == 1 (decode): 8 weight rows streamed side by side.
constexpr int kNrDecode = 8;
// Activation rows per block: the block's float rows should stay in L2 (about 1 MiB).
constexpr size_t kXBlockBytes = 1 << 20;

enum class WType { kF32, kF16, kBf16 };

inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// 16 weights starting at element k of row w, as floats. Exact for all three types.
template <WType T>
inline __m512 LoadW(const uint8_t* w, int k) {
  if constexpr (T == WType::kF32) {
    return _mm512_loadu_ps(w + 4 * k);
  } else if constexpr (T == WType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * k)));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// As LoadW, but only the lanes in `mask` are read; the others are 0.
template <WType T>
inline __m512 LoadWMasked(const uint8_t* w, int k, __mmask16 mask) {
  if constexpr (T == WType::kF32) {
    return _mm512_maskz_loadu_ps(mask, w + 4 * k);
  } else if constexpr (T == WType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, w + 2 * k));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, w + 2 * k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// y[i0 + r][j0 + c] for r < MR, c < NR, over the whole row length.
template <WType T, int MR, int NR>
void FloatTile(const MatmulTile& t, int i0, int j0) {
  const uint8_t* w[NR];
  const float* x[MR];
  for (int c = 0; c < NR; ++c) w[c] = t.w + static_cast<size_t>(j0 + c) * t.w_row_bytes;
  for (int r = 0; r < MR; ++r) {
    x[r] = reinterpret_cast<const float*>(t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes);
  }
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const int k = t.k;
  int kk = 0;
  for (; kk + kLanes <= k; kk += kLanes) {
    __m512 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadW<T>(w[c], kk);
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x[r] + kk);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  if (kk < k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - kk)) - 1);
    __m512 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadWMasked<T>(w[c], kk, mask);
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x[r] + kk);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* y = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
    for (int c = 0; c < NR; ++c) y[c] = HSum(acc[r][c]);
  }
}

template <WType T, int NR>
void FloatTileRows(const MatmulTile& t, int i0, int mr, int j0) {
  switch (mr) {
    case 1:
      return FloatTile<T, 1, NR>(t, i0, j0);
    case 2:
      return FloatTile<T, 2, NR>(t, i0, j0);
    case 3:
      return FloatTile<T, 3, NR>(t, i0, j0);
    case 4:
      return FloatTile<T, 4, NR>(t, i0, j0);
    case 5:
      return FloatTile<T, 5, NR>(t, i0, j0);
    case 6:
      return FloatTile<T, 6, NR>(t, i0, j0);
  }
  assert(false && "FloatTileRows: bad row count");
}

template <WType T>
void MatmulFloat(const MatmulTile& t) {
  assert(t.m >= 0 && t.k >= 0 && t.n_begin <= t.n_end);
  if (t.m == 1) {
    WalkTiles<1, kNrDecode>(
        1, t.n_begin, t.n_end, 1, [](int, int) {},
        [&](int i0, int, int j0, int nr) {
          if (nr == kNrDecode) {
            FloatTile<T, 1, kNrDecode>(t, i0, j0);
          } else {
            FloatTile<T, 1, 1>(t, i0, j0);
          }
        });
    return;
  }
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(t.k > 0 ? t.k : 1);
  const int m_block = static_cast<int>(kXBlockBytes / row_bytes / kMr * kMr);
  WalkTiles<kMr, kNr>(
      t.m, t.n_begin, t.n_end, m_block, [](int, int) {},
      [&](int i0, int mr, int j0, int nr) {
        if (nr == kNr) {
          FloatTileRows<T, kNr>(t, i0, mr, j0);
        } else {
          FloatTileRows<T, 1>(t, i0, mr, j0);
        }
      });
}

}  // namespace

void MatmulF32(const MatmulTile& t) { MatmulFloat<WType::kF32>(t); }
void MatmulF16(const MatmulTile& t) { MatmulFloat<WType::kF16>(t); }
void MatmulBf16(const MatmulTile& t) { MatmulFloat<WType::kBf16>(t); }

}  // namespace kvserve::avx512
