// AVX2 + FMA + F16C kernels: the float-weight matmuls, Q8_0 activation quantization and the vector
// helpers. The quantized matmuls live in quant_matmul_avx2.cc.
//
// Float matmul accumulation order (the determinism contract of kernels.h): output y[i][j] has one
// 8-lane accumulator; lane l sums W[j][k] * X[i][k] for k = l, l + 8, l + 16, ... in increasing k
// with one fused multiply-add each (the last partial vector is zero-padded), and the 8 lanes are
// then added by HSum's fixed tree. Register tiles only change which accumulators share a loop, and
// the x16 layout of packed_floats.h only where the weights are read from.
//
// Everything here is in an anonymous namespace and uses intrinsics only (no inline helpers from
// shared headers), so no AVX2 code can leak into other translation units through COMDAT folding.
// The shared helpers used here, kv_exp_avx2.h, float_weight_rows.h and prefetch_ahead.h, are
// themselves in anonymous namespaces.
#include <immintrin.h>

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/float_weight_rows.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/kv_exp_avx2.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles_scalar.h"
#include "kernels/cpu/recurrent_rows.h"
#include "kernels/cpu/tile_walk.h"

namespace kvserve {

namespace {

constexpr int kLanes = 8;
// Register tile for m > 1: 4 activation rows x 3 weight rows = 12 ymm accumulators, with the 3
// converted weights and one x vector the 16 registers. 3 x 4 (4 weights) spilled for F16 and BF16
// weights: on a Zen 4 VM (bench/kernel_bench.cc, one thread, m = 64 and 128, tinyllama's shapes)
// F16 ran at 48-50 GFLOP/s against 93-101 now, BF16 48-50 against 86-88; F32 (whose weights
// are FMA memory operands) 74-79 either way. 6 x 2 and 5 x 2 gave F16 59-63, 2 x 5 90-103.
constexpr int kMr = 4;
constexpr int kNr = 3;
// Register tile for m == 1 (decode): 8 weight rows streamed side by side.
constexpr int kNrDecode = 8;
// Activation rows per block: the block's float rows should stay in L2 (about 1 MiB).
constexpr size_t kXBlockBytes = 1 << 20;

enum class WType { kF32, kF16, kBf16 };

inline float HSum(__m256 v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Lanes [0, n) all ones, the rest zero (0 <= n <= 8), for maskload.
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 Widen16(__m128i h, WType t) {
  if (t == WType::kF16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// 8 weights stored at p, as floats. Exact for all three types.
template <WType T>
inline __m256 LoadW(const uint8_t* p) {
  if constexpr (T == WType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    return Widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), T);
  }
}

// The first `left` (< 8) weights stored at p; the other lanes are 0.
template <WType T>
inline __m256 LoadWTail(const uint8_t* p, int left, __m256i mask) {
  if constexpr (T == WType::kF32) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(p), mask);
  } else {
    uint16_t buf[8] = {};
    std::memcpy(buf, p, sizeof(uint16_t) * left);
    return Widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)), T);
  }
}

// Where a tile's weight rows are (float_weight_rows.h).
template <WType T, bool kX16>
using WeightRows = FloatWeightRows<T == WType::kF32 ? 4 : 2, kX16>;

// y[i0 + r][j0 + c] for r < MR, c < NR, over the whole row length.
template <WType T, int MR, int NR, bool kX16 = false>
void FloatTile(const MatmulTile& t, int i0, int j0) {
  using Rows = WeightRows<T, kX16>;
  const uint8_t* w[NR];
  const float* x[MR];
  for (int c = 0; c < NR; ++c) w[c] = Rows::Row(t, j0 + c);
  for (int r = 0; r < MR; ++r) {
    x[r] = reinterpret_cast<const float*>(t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes);
  }
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const int k = t.k;
  int kk = 0;
  // Decode: the tile's NR rows are NR short streams side by side, which the hardware prefetcher
  // follows poorly when rows are short; the next tile's rows (the next NR * w_row_bytes bytes) are
  // prefetched as one linear stream, NR * kLanes weights' bytes per step.
  constexpr size_t kStepBytes = NR * kLanes * Rows::kElementBytes;
  const uint8_t* next_tile = w[0] + NR * t.w_row_bytes;
  for (; kk + kLanes <= k; kk += kLanes) {
    if constexpr (MR == 1 && NR == kNrDecode && !kX16) {
      const uint8_t* ahead = next_tile + kStepBytes / kLanes * kk;
      for (size_t line = 0; line < kStepBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
      }
    }
    __m256 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadW<T>(w[c] + Rows::Offset(kk));
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_loadu_ps(x[r] + kk);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  if (kk < k) {
    const int left = k - kk;
    const __m256i mask = LaneMask(left);
    __m256 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadWTail<T>(w[c] + Rows::Offset(kk), left, mask);
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_maskload_ps(x[r] + kk, mask);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* y = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
    for (int c = 0; c < NR; ++c) y[c] = HSum(acc[r][c]);
  }
}

template <WType T, int NR, bool kX16 = false>
void FloatTileRows(const MatmulTile& t, int i0, int mr, int j0) {
  static_assert(kMr == 4, "a case per row count up to kMr");
  switch (mr) {
    case 1:
      return FloatTile<T, 1, NR, kX16>(t, i0, j0);
    case 2:
      return FloatTile<T, 2, NR, kX16>(t, i0, j0);
    case 3:
      return FloatTile<T, 3, NR, kX16>(t, i0, j0);
    case 4:
      return FloatTile<T, 4, NR, kX16>(t, i0, j0);
  }
  assert(false && "FloatTileRows: bad row count");
}

// More than one activation row, on stored rows or the x16 layout.
template <WType T, bool kX16>
void MatmulFloatRows(const MatmulTile& t) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(t.k > 0 ? t.k : 1);
  const int m_block = static_cast<int>(kXBlockBytes / row_bytes / kMr * kMr);
  WalkTiles<kMr, kNr>(
      t.m, t.n_begin, t.n_end, m_block, [](int, int) {},
      [&](int i0, int mr, int j0, int nr) {
        if (nr == kNr) {
          FloatTileRows<T, kNr, kX16>(t, i0, mr, j0);
        } else {
          FloatTileRows<T, 1, kX16>(t, i0, mr, j0);
        }
      });
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
  MatmulFloatRows<T, false>(t);
}

// Elements kk .. kk + 7 of the 8 rows whose first is at w (rows kVectorBytes apart) into acc, as
// FloatTile does them: a whole vector, or (kk + 8 > k) the masked tail, whose weights are the
// layout's zero padding.
template <WType T>
inline void X16HalfStep(const uint8_t* w, const float* x, int kk, int k, __m256 acc[kLanes]) {
  using Rows = WeightRows<T, true>;
  const __m256 xv =
      kk + kLanes <= k ? _mm256_loadu_ps(x + kk) : _mm256_maskload_ps(x + kk, LaneMask(k - kk));
  for (int r = 0; r < kLanes; ++r) {
    acc[r] = _mm256_fmadd_ps(LoadW<T>(w + r * Rows::kVectorBytes), xv, acc[r]);
  }
}

// Decode (one activation row) on the x16 layout, a 16-row group at a time, one vector of its 16
// rows per step (the next 512 bytes of F16: one forward stream). The 16 accumulators do not fit
// in AVX2's 16 registers next to the weights and x, so each step does rows 0-7 and then 8-15,
// their accumulators kept in memory between halves (a store and a load change no bits; L1 work in
// a memory-bound loop). Steps of 2 to 128 vectors per half, each half one pass over them, were
// slower on a Zen 4 VM (KVSERVE_ISA=avx2, tinyllama F16, alternating: 2 vectors 18.7-19.9 t/s
// against 23.1-23.9 for one; 8, 32 and 128 vectors 11-17). Every
// row's sum is FloatTile's (one accumulator, increasing k, HSum). kAheadL2: each step's bytes are
// also prefetched kPrefetchAheadBytes<kL2> further on into L2.
template <WType T, bool kAheadL2>
void X16DecodeTile(const MatmulTile& t, int j0) {
  using Rows = WeightRows<T, true>;
  const uint8_t* step = Rows::Row(t, j0);
  const float* x = reinterpret_cast<const float*>(t.x);
  alignas(32) float sums[kPackRows][kLanes] = {};
  for (int kk = 0; kk < t.k; kk += Rows::kVectorElements, step += Rows::kStep) {
    if constexpr (kAheadL2) PrefetchLinesAhead<PrefetchLevel::kL2>(step, Rows::kStep);
    for (int half = 0; half < 2; ++half) {
      float(*half_sums)[kLanes] = sums + half * kLanes;
      const uint8_t* w = step + static_cast<size_t>(half) * kLanes * Rows::kVectorBytes;
      __m256 acc[kLanes];
      for (int r = 0; r < kLanes; ++r) acc[r] = _mm256_load_ps(half_sums[r]);
      X16HalfStep<T>(w, x, kk, t.k, acc);
      if (kk + kLanes < t.k) {
        X16HalfStep<T>(w + kLanes * Rows::kElementBytes, x, kk + kLanes, t.k, acc);
      }
      for (int r = 0; r < kLanes; ++r) _mm256_store_ps(half_sums[r], acc[r]);
    }
  }
  const int rows = t.n_end - j0 < kPackRows ? t.n_end - j0 : kPackRows;
  for (int r = 0; r < rows; ++r) t.y[j0 + r] = HSum(_mm256_load_ps(sums[r]));
}

// The x16 layout (packed_floats.h): n_begin a multiple of 16.
template <WType T, bool kAheadL2 = false>
void MatmulFloatX16(const MatmulTile& t) {
  assert(t.m >= 0 && t.k >= 0 && t.n_begin <= t.n_end && t.n_begin % kPackRows == 0);
  if (t.m == 1) {
    for (int j0 = t.n_begin; j0 < t.n_end; j0 += kPackRows) X16DecodeTile<T, kAheadL2>(t, j0);
    return;
  }
  MatmulFloatRows<T, true>(t);
}

void MatmulF32(const MatmulTile& t) { MatmulFloat<WType::kF32>(t); }
void MatmulF16(const MatmulTile& t) { MatmulFloat<WType::kF16>(t); }
void MatmulBf16(const MatmulTile& t) { MatmulFloat<WType::kBf16>(t); }
void MatmulF32X16(const MatmulTile& t) { MatmulFloatX16<WType::kF32>(t); }
void MatmulF16X16(const MatmulTile& t) { MatmulFloatX16<WType::kF16>(t); }
void MatmulBf16X16(const MatmulTile& t) { MatmulFloatX16<WType::kBf16>(t); }
void MatmulF32X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kF32, true>(t); }
void MatmulF16X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kF16, true>(t); }
void MatmulBf16X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kBf16, true>(t); }

// Same arithmetic as the scalar twin: d = amax / 127 (f16-stored, rounded to nearest even),
// quants = nearbyint(x * (1 / d)) under the default rounding mode (ties to even).
void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  assert(k % 32 == 0);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int b = 0; b < k / 32; ++b) {
    __m256 v[4];
    for (int q = 0; q < 4; ++q) v[q] = _mm256_loadu_ps(x + 32 * b + 8 * q);
    const __m256 a =
        _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                      _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m128i dh = _mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT);
    const uint16_t scale = static_cast<uint16_t>(_mm_extract_epi16(dh, 0));
    std::memcpy(&out[b].scale, &scale, sizeof(scale));
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], idv));
    // packs interleave 128-bit lanes; the permute restores element order.
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].quants), ordered);
  }
}

// Two accumulators (even and odd 8-lane steps), added lane-wise, then HSum.
float DotF32(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + kLanes), _mm256_loadu_ps(b + i + kLanes), acc1);
  }
  for (; i < n; i += kLanes) {
    const __m256i mask = LaneMask(n - i);
    acc0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, mask), _mm256_maskload_ps(b + i, mask), acc0);
  }
  return HSum(_mm256_add_ps(acc0, acc1));
}

// The scalar twin's branches as masks; the f16 rounding of _mm256_cvtps_ph is the scalar
// FloatToFp16's (nearest even). A lane's gather reads entries h and h + 1 and keeps h.
void GeluF16Table(const uint16_t* table, float* x, int n) {
  const __m256 low = _mm256_set1_ps(-10.0f);
  const __m256 high = _mm256_set1_ps(10.0f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int i = 0; i < n; i += 8) {
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), lane);
    const __m256 v = _mm256_maskload_ps(x + i, live);
    const __m256 zero = _mm256_cmp_ps(v, low, _CMP_LE_OQ);
    const __m256 lookup = _mm256_andnot_ps(zero, _mm256_cmp_ps(v, high, _CMP_LT_OQ));
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    const __m256i entries =
        _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(table), h,
                                    _mm256_castps_si256(lookup), 2);
    const __m256i low_halves = _mm256_and_si256(entries, _mm256_set1_epi32(0xffff));
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(low_halves),
                                            _mm256_extracti128_si256(low_halves, 1));
    __m256 out = _mm256_blendv_ps(v, _mm256_cvtph_ps(packed), lookup);
    out = _mm256_andnot_ps(zero, out);
    _mm256_maskstore_ps(x + i, live, out);
  }
}

void SwiGlu(float* gate, const float* up, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int i = 0; i < n; i += kLanes) {
    const __m256i live = LaneMask(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, live);
    const __m256 e = avx2::KvExp(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_maskstore_ps(gate + i, live, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, live)));
  }
}

constexpr KernelTable kAvx2 = {
    .isa = "avx2",
    .matmul_f32 = MatmulF32,
    .matmul_f16 = MatmulF16,
    .matmul_bf16 = MatmulBf16,
    .matmul_q8_0 = avx2::MatmulQ8_0,
    .matmul_q4_0 = avx2::MatmulQ4_0,
    .matmul_q8_0_x16 = avx2::MatmulQ8_0x16,
    .matmul_q4_0_x16 = avx2::MatmulQ4_0x16,
    .matmul_q4_k_x16 = avx2::MatmulQ4_Kx16,
    .matmul_q5_k_x16 = avx2::MatmulQ5_Kx16,
    .matmul_q6_k_x16 = avx2::MatmulQ6_Kx16,
    .matmul_q4_1_x16 = avx2::MatmulQ4_1x16,
    .matmul_q5_0_x16 = avx2::MatmulQ5_0x16,
    .matmul_q5_1_x16 = avx2::MatmulQ5_1x16,
    .matmul_iq4_nl_x16 = avx2::MatmulIq4Nlx16,
    .matmul_mxfp4_x16 = avx2::MatmulMxfp4x16,
    .matmul_f32_x16 = MatmulF32X16,
    .matmul_f16_x16 = MatmulF16X16,
    .matmul_bf16_x16 = MatmulBf16X16,
    .decode_q4_k_x16_alt = avx2::MatmulQ4_Kx16TwoPass,
    .decode_q5_k_x16_alt = avx2::MatmulQ5_Kx16TwoPass,
    .decode_q6_k_x16_alt = avx2::MatmulQ6_Kx16TwoPass,
    .kquant_decode_first_name = "one-pass",
    .kquant_decode_alt_name = "two-pass",
    .decode_q8_0_x16_l2 = avx2::MatmulQ8_0x16L2,
    .decode_q4_0_x16_l2 = avx2::MatmulQ4_0x16L2,
    .decode_q4_1_x16_l2 = avx2::MatmulQ4_1x16L2,
    .decode_q5_0_x16_l2 = avx2::MatmulQ5_0x16L2,
    .decode_q5_1_x16_l2 = avx2::MatmulQ5_1x16L2,
    .decode_iq4_nl_x16_l2 = avx2::MatmulIq4Nlx16L2,
    .decode_mxfp4_x16_l2 = avx2::MatmulMxfp4x16L2,
    .decode_f32_x16_l2 = MatmulF32X16L2,
    .decode_f16_x16_l2 = MatmulF16X16L2,
    .decode_bf16_x16_l2 = MatmulBf16X16L2,
    .matmul_q4_1 = scalar::MatmulQ4_1,
    .matmul_q5_0 = scalar::MatmulQ5_0,
    .matmul_q5_1 = scalar::MatmulQ5_1,
    .matmul_iq4_nl = scalar::MatmulIq4Nl,
    .matmul_mxfp4 = scalar::MatmulMxfp4,
    .matmul_q2_k = avx2::MatmulQ2_K,
    .matmul_q3_k = avx2::MatmulQ3_K,
    .matmul_q4_k = avx2::MatmulQ4_K,
    .matmul_q5_k = avx2::MatmulQ5_K,
    .matmul_q6_k = avx2::MatmulQ6_K,
    .quantize_row_q8_0 = QuantizeRowQ8_0,
    .quantize_row_q8_1 = avx2::QuantizeRowQ8_1,
    .quantize_row_q8_k = avx2::QuantizeRowQ8_K,
    .dot_f32 = DotF32,
    .attend_head = avx2::AttendHead,
    .attend_group = avx2::AttendGroup,
    .gelu_f16_table = GeluF16Table,
    .swiglu = SwiGlu,
    .delta_rule_step = avx2::DeltaRule,
    .conv_rows = avx2::ShortConvRows,
    .mat_acc = avx2::MatAccumulate,
};

}  // namespace

const KernelTable* Avx2Kernels() { return &kAvx2; }

}  // namespace kvserve
