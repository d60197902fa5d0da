// AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels: the float-weight matmuls, Q8_0 activation
// quantization and the vector helpers. The quantized matmuls live in quant_matmul_avx512.cc.
//
// Float matmul accumulation order (the determinism contract of kernels.h): output y[i][j] has one
// 16-lane accumulator; lane l sums W[j][k] * X[i][k] for k = l, l + 16, l + 32, ... in increasing
// k with one fused multiply-add each (the last partial vector is zero-padded), and the 16 lanes are
// then added by HSum's fixed tree. Register tiles only change which accumulators share a loop.
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
#include <cstring>

#include "kernels/attend_head.h"
#include "kernels/kernels.h"
#include "kernels/quant_matmul.h"
#include "kernels/tile_walk.h"

namespace kvserve {

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

void MatmulF32(const MatmulTile& t) { MatmulFloat<WType::kF32>(t); }
void MatmulF16(const MatmulTile& t) { MatmulFloat<WType::kF16>(t); }
void MatmulBf16(const MatmulTile& t) { MatmulFloat<WType::kBf16>(t); }

// Same arithmetic as the scalar twin: d = amax / 127 (f16-stored, rounded to nearest even),
// quants = nearbyint(x * (1 / d)) under the default rounding mode (ties to even).
void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  assert(k % 32 == 0);
  const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const __m512 a = _mm512_max_ps(_mm512_and_ps(v0, sign_mask), _mm512_and_ps(v1, sign_mask));
    const float amax = _mm512_reduce_max_ps(a);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m128i h = _mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT);
    const uint16_t scale = static_cast<uint16_t>(_mm_extract_epi16(h, 0));
    std::memcpy(&out[b].scale, &scale, sizeof(scale));
    const __m512 idv = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16), _mm512_cvtsepi32_epi8(q1));
  }
}

// Two accumulators (even and odd 16-lane steps), added lane-wise, then HSum.
float DotF32(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + kLanes), _mm512_loadu_ps(b + i + kLanes), acc1);
  }
  for (; i < n; i += kLanes) {
    const int left = n - i < kLanes ? n - i : kLanes;
    const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                           acc0);
  }
  return HSum(_mm512_add_ps(acc0, acc1));
}

// Multiply, then add (no fusion), exactly as the scalar twin rounds.
void AxpyF32(float a, const float* x, float* y, int n) {
  const __m512 av = _mm512_set1_ps(a);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 p = _mm512_mul_ps(av, _mm512_loadu_ps(x + i));
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), p));
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 p = _mm512_mul_ps(av, _mm512_maskz_loadu_ps(mask, x + i));
    _mm512_mask_storeu_ps(y + i, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + i), p));
  }
}

constexpr KernelTable kAvx512 = {
    .isa = "avx512",
    .matmul_f32 = MatmulF32,
    .matmul_f16 = MatmulF16,
    .matmul_bf16 = MatmulBf16,
    .matmul_q8_0 = avx512::MatmulQ8_0,
    .matmul_q4_0 = avx512::MatmulQ4_0,
    .matmul_q8_0_x16 = avx512::MatmulQ8_0x16,
    .matmul_q4_0_x16 = avx512::MatmulQ4_0x16,
    .quantize_row_q8_0 = QuantizeRowQ8_0,
    .dot_f32 = DotF32,
    .axpy_f32 = AxpyF32,
    .attend_head = avx512::AttendHead,
};

}  // namespace

const KernelTable* Avx512Kernels() { return &kAvx512; }

}  // namespace kvserve
