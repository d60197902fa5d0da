// AVX-512 float-weight matmul tiles: F32, F16 and BF16 weights against float32 activations.
//
// Accumulation order (the determinism contract of kernels.h): output y[i][j] has one 16-lane
// accumulator; lane l sums W[j][k] * X[i][k] for k = l, l + 16, l + 32, ... in increasing k with
// one fused multiply-add each (the last partial vector is zero-padded), and the 16 lanes are then
// added by HSum's fixed tree. Register tiles only change which accumulators share a loop.
//
// Everything here is in an anonymous namespace and uses intrinsics only (no inline helpers from
// shared headers), so no AVX-512 code can leak into other translation units through COMDAT folding.
#include "kernels/cpu/immintrin_avx512.h"

#include <cassert>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/float_matmul.h"
#include "kernels/cpu/float_weight_rows.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/cpu/tile_walk.h"

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

// HSum of 16 accumulators at once, bit for bit: every sum gets HSum's additions in HSum's order
// ((lo256 + hi256), then (lo128 + hi128), then lanes l + 2, then l + 1), only computed for 16
// accumulators side by side by shuffles (about 3 shuffles and adds per output instead of 8).
// Returns HSum(a[q]) in 128-bit chunk q % 4, lane q / 4.
inline __m512 TransposedHalvingSum16(const __m512 a[kLanes]) {
  __m512 s8[8];  // s8[p]: lanes 0-7 accumulator 2p, lanes 8-15 accumulator 2p + 1 (8 partials)
  for (int p = 0; p < 8; ++p) {
    const __m512 lo = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s8[p] = _mm512_add_ps(lo, hi);
  }
  __m512 s4[4];  // s4[p]: chunk c holds accumulator 4p + c (4 partials)
  for (int p = 0; p < 4; ++p) {
    const __m512 lo = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 hi = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1));
    s4[p] = _mm512_add_ps(lo, hi);
  }
  __m512 s2[2];  // s2[p]: chunk c, lanes 0-1: accumulator 8p + c; lanes 2-3: 8p + 4 + c
  for (int p = 0; p < 2; ++p) {
    const __m512 lo = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s2[p] = _mm512_add_ps(lo, hi);
  }
  const __m512 lo = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 hi = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1));
  return _mm512_add_ps(lo, hi);  // chunk c, lane i: accumulator c + 4 i
}

// As TransposedHalvingSum16 for 8 accumulators: returns HSum(a[q]) in chunk q % 4, lane q / 4
// (lanes 2-3 of each chunk repeat lanes 0-1).
inline __m512 TransposedHalvingSum8(const __m512 a[8]) {
  __m512 s8[4];
  for (int p = 0; p < 4; ++p) {
    const __m512 lo = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s8[p] = _mm512_add_ps(lo, hi);
  }
  __m512 s4[2];
  for (int p = 0; p < 2; ++p) {
    const __m512 lo = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 hi = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1));
    s4[p] = _mm512_add_ps(lo, hi);
  }
  const __m512 s2 = _mm512_add_ps(_mm512_shuffle_ps(s4[0], s4[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(s4[0], s4[1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(s2, s2, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(s2, s2, _MM_SHUFFLE(3, 1, 3, 1)));
}

// 16 stored F16 or BF16 values as floats. Exact.
template <WType T>
inline __m512 Widen(__m256i h) {
  if constexpr (T == WType::kF16) {
    return _mm512_cvtph_ps(h);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// 16 weights stored at w, as floats. Exact for all three types.
template <WType T>
inline __m512 LoadW(const uint8_t* w) {
  if constexpr (T == WType::kF32) {
    return _mm512_loadu_ps(w);
  } else {
    return Widen<T>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  }
}

// As LoadW, but only the lanes in `mask` are read; the others are 0.
template <WType T>
inline __m512 LoadWMasked(const uint8_t* w, __mmask16 mask) {
  if constexpr (T == WType::kF32) {
    return _mm512_maskz_loadu_ps(mask, w);
  } else {
    return Widen<T>(_mm256_maskz_loadu_epi16(mask, w));
  }
}

// Where a tile's weight rows are (float_weight_rows.h).
template <WType T, bool kX16>
using WeightRows = FloatWeightRows<T == WType::kF32 ? 4 : 2, kX16>;
static_assert(WeightRows<WType::kF32, false>::kVectorElements == kLanes, "a vector per register");

// y[i0 + r][j0 + c] for r < MR, c < NR, over the whole row length. L: where the decode tile
// (MR == 1, NR == kNrDecode, stored rows) prefetches the next tile's rows.
template <WType T, int MR, int NR, PrefetchLevel L = PrefetchLevel::kL1, bool kX16 = false>
void FloatTile(const MatmulTile& t, int i0, int j0) {
  using Rows = WeightRows<T, kX16>;
  const uint8_t* w[NR];
  const float* x[MR];
  for (int c = 0; c < NR; ++c) w[c] = Rows::Row(t, j0 + c);
  for (int r = 0; r < MR; ++r) {
    x[r] = reinterpret_cast<const float*>(t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes);
  }
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const int k = t.k;
  int kk = 0;
  // Decode: the tile's NR rows are NR short streams side by side, which the hardware prefetcher
  // follows poorly (Zen 4: the F16 decode ran 20-40% below the AVX2 table's, which prefetches);
  // the next tile's rows (the next NR * w_row_bytes bytes) are prefetched as one linear stream,
  // NR * kLanes weights' bytes per step. Prefetches change no bits.
  constexpr size_t kStepBytes = NR * kLanes * (T == WType::kF32 ? 4 : 2);
  const uint8_t* next_tile = w[0] + NR * t.w_row_bytes;
  size_t offset = 0;  // of vector kk / kLanes in a row
  for (; kk + kLanes <= k; kk += kLanes, offset += Rows::kStep) {
    if constexpr (MR == 1 && NR == kNrDecode && !kX16) {
      const uint8_t* ahead = next_tile + kStepBytes / kLanes * kk;
      for (size_t line = 0; line < kStepBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + line), kPrefetchHint<L>);
      }
    }
    __m512 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadW<T>(w[c] + offset);
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x[r] + kk);
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  if (kk < k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - kk)) - 1);
    __m512 wv[NR];
    for (int c = 0; c < NR; ++c) wv[c] = LoadWMasked<T>(w[c] + offset, mask);
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

template <WType T, int NR, bool kX16>
void FloatTileRows(const MatmulTile& t, int i0, int mr, int j0) {
  constexpr PrefetchLevel kL1 = PrefetchLevel::kL1;
  switch (mr) {
    case 1:
      return FloatTile<T, 1, NR, kL1, kX16>(t, i0, j0);
    case 2:
      return FloatTile<T, 2, NR, kL1, kX16>(t, i0, j0);
    case 3:
      return FloatTile<T, 3, NR, kL1, kX16>(t, i0, j0);
    case 4:
      return FloatTile<T, 4, NR, kL1, kX16>(t, i0, j0);
    case 5:
      return FloatTile<T, 5, NR, kL1, kX16>(t, i0, j0);
    case 6:
      return FloatTile<T, 6, NR, kL1, kX16>(t, i0, j0);
  }
  assert(false && "FloatTileRows: bad row count");
}

// ---- Packed path (prefill, m >= kMinPackedRows) ----
//
// The full-k register tiles above read 6 activation rows and 4 weight rows of k floats per tile:
// for k >= 1024 that does not fit in L1, so every FMA waits on L2, and F16/BF16 weights are
// converted again for every tile of activation rows. The packed path instead:
// - copies a panel of weight rows once per call into a thread-local buffer (sized to stay in L2),
//   laid out so that each k block of the panel is one contiguous stream: F32 as floats, F16 and
//   BF16 as their stored 16-bit values, which the register tile converts (exactly) as it loads
//   them. Converted to floats when packed, the panels cost each 24 FMAs 256 bytes of weights from
//   L1 or L2 besides the activations' 384, and on a Zen 5 VM (512-bit FMA units) the tile then
//   ran F16 and BF16 at 108-151 GFLOP/s on one core against 126-180 with 16-bit panels
//   (bench/kernel_bench.cc, 2048x2048, m = 64 and 512, three alternating pairs; tinyllama F16
//   pp128, 2 threads, 6 alternating rounds: 118.2 -> 128.0 t/s);
// - copies each kPackMr-row tile of activations into a contiguous panel (zero rows past m);
// - walks k in blocks of kKBlockVectors vectors: the weight panel's block and the activation
//   tile's block come from L2, and the 16-lane accumulators of the tile row are stored to a
//   thread-local spill buffer between k blocks and reloaded (exact: a store and a load change no
//   bits).
// Each accumulator still gets one FMA per 16-lane vector of k in increasing k, starting from zero,
// and the packed panels are zero-padded exactly where the full-k tiles use masked (zeroing) loads,
// so the zero-padded last vector contributes the same fma(+0, +0, acc). Then the same HSum. The
// bits are those of the full-k tiles and of m == 1.
constexpr int kPackMr = 6;  // activation rows per register tile
constexpr int kPackNr = 4;  // weight rows per register tile: 24 accumulators + 4 weights + 1 x
// 16-float vectors of k per block (kPanelKBlockFloats / 16). Blocks of 64 vectors, whose
// activation block (24 KiB) was meant to stay in L1, measured slower on a Zen 4 VM (32 KiB L1D,
// 1 MiB L2; tinyllama F16 pp128, 2 threads, 3 alternating rounds: 68.6-79.7 t/s against 76.3-84.7
// with 256): the streaming weights evicted it anyway, and the spills between blocks cost more.
constexpr int kKBlockVectors = kPanelKBlockFloats / kLanes;
// Vectors in the k block that starts at vector kb0 of a row of kv vectors (the last one shorter).
inline int KBlockLength(int kv, int kb0) {
  return kv - kb0 < kKBlockVectors ? kv - kb0 : kKBlockVectors;
}
// Bytes of packed weights per panel (kept in L2 next to the activation panel and the spills).
constexpr size_t kWPanelBytes = 512 << 10;
// Below this many activation rows, packing costs more than it saves: use the full-k tiles.
constexpr int kMinPackedRows = 16;

// Scratch (MatmulTile::scratch): w = [k block][row tile][vector in block][kPackNr][16] weight
// panel, x = [vector][kPackMr][16] activation panel, acc = [row tile][kPackMr][kPackNr][16] spilled
// accumulators.

// Vector v (16 elements from 16 v) of a row of k floats, zero past k; `step`: bytes from one
// vector of the row to the next.
inline __m512 LoadFloatVector(const uint8_t* w, int v, int k, size_t step) {
  const int kk = kLanes * v;
  if (kk + kLanes <= k) return LoadW<WType::kF32>(w + step * v);
  return LoadWMasked<WType::kF32>(w + step * v, static_cast<__mmask16>((1u << (k - kk)) - 1));
}

// As LoadFloatVector for a row of 16-bit values (F16, BF16), as stored.
inline __m256i LoadStoredVector(const uint8_t* w, int v, int k, size_t step) {
  const int kk = kLanes * v;
  if (kk + kLanes <= k) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + step * v));
  return _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << (k - kk)) - 1), w + step * v);
}

// What a weight panel holds: F16 and BF16 weights stay 16-bit, and the tile converts each vector
// in registers (exact, so the same bits), which halves the panel bytes each FMA reads from L1 or
// L2; F32 weights are floats.
template <WType T>
using PanelElement = std::conditional_t<T == WType::kF32, float, uint16_t>;

// Vector p[0 .. 16) of a panel, as floats.
template <WType T>
inline __m512 LoadPanel(const PanelElement<T>* p) {
  if constexpr (T == WType::kF32) {
    return _mm512_load_ps(p);
  } else {
    return Widen<T>(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
}

// Vector v of a weight row (nullptr: a row past the matrix, zeros) into the panel at `out`: floats
// (F32), else the stored 16-bit values; zero past k.
template <WType T>
inline void PackWeightVector(const uint8_t* row, int v, int k, size_t step, PanelElement<T>* out) {
  if constexpr (T == WType::kF32) {
    _mm512_store_ps(out, row != nullptr ? LoadFloatVector(row, v, k, step) : _mm512_setzero_ps());
  } else {
    const __m256i h = row != nullptr ? LoadStoredVector(row, v, k, step) : _mm256_setzero_si256();
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), h);
  }
}

// Copies weight rows [j0, j0 + nc) (of the tile's k) into `panel`: row tiles of kPackNr rows
// (rows past nc are zero), k blocks of kKBlockVectors vectors (the last one shorter), laid out
// [k block][row tile][vector in block][kPackNr][16] so that one k block of the panel is contiguous.
// Stored rows are read one after another; the x16 layout a 16-row group at a time in its own
// order (vector v of the group's rows, then v + 1: one forward stream), since reading it row by
// row touched every line of the group once per row (a Zen 4 VM: the conversion's loads waited on
// cache misses for 10% of an F16 prefill's matmul time). j0 is a multiple of kPackNr, so a row
// tile never straddles two groups. The destination advances by a fixed stride within a k block:
// computing each vector's place from scratch cost a Zen 5 VM 12% of an F16 prefill matmul's time.
template <WType T, bool kX16>
void PackWeightPanel(const MatmulTile& t, int j0, int nc, int kv, PanelElement<T>* panel) {
  using Rows = WeightRows<T, kX16>;
  constexpr int kTileVector = kPackNr * kLanes;  // elements from a tile's vector v to v + 1
  const int row_tiles = (nc + kPackNr - 1) / kPackNr;
  const auto row = [&](int j) { return j < nc ? Rows::Row(t, j0 + j) : nullptr; };
  // Where vector kb0 (the start of a k block) of row tile jt's row 0 goes.
  const auto block_start = [&](int jt, int kb0) {
    const int kbn = KBlockLength(kv, kb0);
    return panel +
           (static_cast<size_t>(kb0) * row_tiles + static_cast<size_t>(jt) * kbn) * kTileVector;
  };
  // Row tiles [jt0, jt1) are copied together: one group's (x16) or one tile's (stored).
  for (int jt0 = 0; jt0 < row_tiles;) {
    int jt1 = jt0 + 1;
    while (kX16 && jt1 < row_tiles && (j0 + jt1 * kPackNr) % kPackRows != 0) ++jt1;
    if constexpr (kX16) {
      for (int kb0 = 0; kb0 < kv; kb0 += kKBlockVectors) {
        const int kb1 = kb0 + KBlockLength(kv, kb0);
        for (int v = kb0; v < kb1; ++v) {
          for (int jt = jt0; jt < jt1; ++jt) {
            PanelElement<T>* out = block_start(jt, kb0) + (v - kb0) * kTileVector;
            for (int c = 0; c < kPackNr; ++c) {
              PackWeightVector<T>(row(jt * kPackNr + c), v, t.k, Rows::kStep, out + c * kLanes);
            }
          }
        }
      }
    } else {
      for (int c = 0; c < kPackNr; ++c) {
        const uint8_t* r = row(jt0 * kPackNr + c);
        for (int kb0 = 0; kb0 < kv; kb0 += kKBlockVectors) {
          const int kb1 = kb0 + KBlockLength(kv, kb0);
          PanelElement<T>* out = block_start(jt0, kb0) + c * kLanes;
          for (int v = kb0; v < kb1; ++v, out += kTileVector) {
            PackWeightVector<T>(r, v, t.k, Rows::kStep, out);
          }
        }
      }
    }
    jt0 = jt1;
  }
}

// Copies activation rows [i0, i0 + mr) into `panel` as [vector][kPackMr][16], zero past mr and k.
void PackActivationPanel(const MatmulTile& t, int i0, int mr, int kv, float* panel) {
  for (int r = 0; r < kPackMr; ++r) {
    const uint8_t* x = t.x + static_cast<size_t>(i0 + r) * t.x_row_bytes;
    for (int v = 0; v < kv; ++v) {
      const __m512 xv =
          r < mr ? LoadFloatVector(x, v, t.k, kLanes * sizeof(float)) : _mm512_setzero_ps();
      _mm512_store_ps(panel + (static_cast<size_t>(v) * kPackMr + r) * kLanes, xv);
    }
  }
}

// Stores the sums of a register tile's accumulators (acc[r][c]: tile row r, weight row c) as
// y[r * ldy + c] for r < mr, c < nr. Rows 0-3 (16 accumulators, accumulator r + 4c -> chunk r,
// lane c) and the last two rows of a 2- or 6-row tile (8 accumulators, accumulator c + 4r' ->
// chunk c, lane r') are reduced side by side, each sum by HSum's tree.
template <int MR>
inline void StoreTileSums(const __m512 (&acc)[MR][kPackNr], float* y, int ldy, int mr, int nr) {
  static_assert(kPackNr == 4 && (MR == 2 || MR == 4 || MR == 6), "the reductions below");
  const __mmask8 columns = static_cast<__mmask8>((1u << nr) - 1);
  int r0 = 0;  // the first row the 8-accumulator reduction stores
  if constexpr (MR >= 4) {
    __m512 top[kLanes];
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < kPackNr; ++c) top[r + 4 * c] = acc[r][c];
    }
    const __m512 top_sums = TransposedHalvingSum16(top);
    _mm_mask_storeu_ps(y, columns, _mm512_castps512_ps128(top_sums));
    if (mr > 1) _mm_mask_storeu_ps(y + ldy, columns, _mm512_extractf32x4_ps(top_sums, 1));
    if (mr > 2) _mm_mask_storeu_ps(y + 2 * ldy, columns, _mm512_extractf32x4_ps(top_sums, 2));
    if (mr > 3) _mm_mask_storeu_ps(y + 3 * ldy, columns, _mm512_extractf32x4_ps(top_sums, 3));
    r0 = 4;
  }
  if constexpr (MR % 4 == 2) {
    if (mr <= r0) return;
    __m512 bottom[8];
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < kPackNr; ++c) bottom[c + 4 * r] = acc[r0 + r][c];
    }
    // Chunk c, lane r' -> lane 4 r' + c: the two tile rows as two 128-bit halves.
    const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 bottom_sums = _mm512_permutexvar_ps(rows, TransposedHalvingSum8(bottom));
    _mm_mask_storeu_ps(y + r0 * ldy, columns, _mm512_castps512_ps128(bottom_sums));
    if (mr > r0 + 1) {
      _mm_mask_storeu_ps(y + (r0 + 1) * ldy, columns, _mm512_extractf32x4_ps(bottom_sums, 1));
    }
  }
}

// One register tile of MR activation rows (2, 4 or 6; the tile's mr <= MR real ones) over one k
// block of `vectors` vectors: x_rows[r] is row r's first vector of the block, x_vector_floats from
// one vector to the next; w_block is [vector][kPackNr][16]. The accumulators start at zero on the
// first k block, else from `spill` ([kPackMr][kPackNr][16]); after the last k block their sums go
// to y (StoreTileSums), else back to `spill`. A tile of m's last 1-4 rows uses MR 2 or 4: a 6-row
// tile would spend up to 5/6 of its multiply-adds on rows that are never stored.
template <WType T, int MR>
inline void PackedTile(const float* const x_rows[kPackMr], int x_vector_floats,
                       const PanelElement<T>* w_block, int vectors, float* spill, bool first,
                       bool last, float* y, int ldy, int mr, int nr, const float* prefetch,
                       int prefetch_lines) {
  static_assert(MR <= kPackMr, "the spill and the activation panel hold kPackMr rows");
  const float* x[MR];
  for (int r = 0; r < MR; ++r) x[r] = x_rows[r];
  __m512 acc[MR][kPackNr];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < kPackNr; ++c) {
      acc[r][c] = first ? _mm512_setzero_ps() : _mm512_load_ps(spill + (r * kPackNr + c) * kLanes);
    }
  }
  for (int v = 0; v < vectors; ++v) {
    const PanelElement<T>* wp = w_block + v * kPackNr * kLanes;
    const size_t x_offset = static_cast<size_t>(v) * x_vector_floats;
    // One line of the next activation block per step, so the fetches from L3 never crowd out the
    // weight panel's loads from L2.
    if (v < prefetch_lines)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + v * kLanes), _MM_HINT_T0);
    __m512 wv[kPackNr];
    for (int c = 0; c < kPackNr; ++c) wv[c] = LoadPanel<T>(wp + c * kLanes);
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_load_ps(x[r] + x_offset);
      for (int c = 0; c < kPackNr; ++c) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
  }
  if (last) {
    StoreTileSums<MR>(acc, y, ldy, mr, nr);
    return;
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < kPackNr; ++c) {
      _mm512_store_ps(spill + (r * kPackNr + c) * kLanes, acc[r][c]);
    }
  }
}

// Software prefetch (into L2) of `rows` rows of `row_bytes` bytes, `stride` bytes apart, spread
// evenly over `steps` calls of Step(): the activations of the next register tile and the weights of
// the next panel arrive from L3 or DRAM while the current ones are being multiplied, instead of
// stalling the packing loops.
class RowPrefetcher {
 public:
  RowPrefetcher(const uint8_t* base, size_t stride, int rows, size_t row_bytes, int steps)
      : base_(base),
        stride_(stride),
        rows_(rows),
        lines_per_row_(static_cast<int>((row_bytes + 63) / 64)) {
    const int64_t total = static_cast<int64_t>(rows) * lines_per_row_;
    per_step_ = static_cast<int>((total + steps - 1) / (steps > 0 ? steps : 1));
  }
  void Step() {
    for (int i = 0; i < per_step_ && row_ < rows_; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(base_ + row_ * stride_ + line_ * 64), _MM_HINT_T1);
      if (++line_ == lines_per_row_) {
        line_ = 0;
        ++row_;
      }
    }
  }

 private:
  const uint8_t* base_;
  size_t stride_;
  int rows_;
  int lines_per_row_;
  int per_step_ = 0;
  int row_ = 0;
  int line_ = 0;
};

template <WType T, bool kX16>
void MatmulFloatPacked(const MatmulTile& t) {
  const int kv = (t.k + kLanes - 1) / kLanes;  // 16-float vectors per row, the last zero-padded
  const size_t row_floats = static_cast<size_t>(kv) * kLanes;
  const int n = t.n_end - t.n_begin;
  int panel_rows =
      static_cast<int>(kWPanelBytes / (sizeof(PanelElement<T>) * row_floats)) / kPackNr * kPackNr;
  if (panel_rows < kPackNr) panel_rows = kPackNr;
  const int n_padded = (n + kPackNr - 1) / kPackNr * kPackNr;
  if (panel_rows > n_padded) panel_rows = n_padded;
  PanelElement<T>* w_panel = reinterpret_cast<PanelElement<T>*>(t.scratch->w.GetFloats(
      (static_cast<size_t>(panel_rows) * row_floats * sizeof(PanelElement<T>) + 3) / 4));
  const int m_tiles = (t.m + kPackMr - 1) / kPackMr;
  // Activation rows that are whole 16-float vectors starting on 64-byte boundaries are read in
  // place (no zero padding needed, aligned loads); other layouts are copied into x_panel. (Reading
  // misaligned rows in place measured slower than copying them: every load splits a line.)
  const bool x_in_place =
      t.k % kLanes == 0 && t.x_row_bytes % 64 == 0 && reinterpret_cast<uintptr_t>(t.x) % 64 == 0;
  float* x_panel = nullptr;
  if (!x_in_place) {
    x_panel = t.scratch->x.GetFloats(static_cast<size_t>(m_tiles) * kPackMr * row_floats);
    for (int i0 = 0; i0 < t.m; i0 += kPackMr) {
      const int mr = t.m - i0 < kPackMr ? t.m - i0 : kPackMr;
      PackActivationPanel(t, i0, mr, kv, x_panel + static_cast<size_t>(i0) * row_floats);
    }
  }
  float* spills = t.scratch->acc.GetFloats(static_cast<size_t>(panel_rows / kPackNr) * kPackMr *
                                           kPackNr * kLanes);
  const int k_blocks = (kv + kKBlockVectors - 1) / kKBlockVectors;
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += panel_rows) {
    const int nc = t.n_end - j0 < panel_rows ? t.n_end - j0 : panel_rows;
    const int row_tiles = (nc + kPackNr - 1) / kPackNr;
    PackWeightPanel<T, kX16>(t, j0, nc, kv, w_panel);
    const int next_j0 = j0 + nc;
    const int next_nc = t.n_end - next_j0 < panel_rows ? t.n_end - next_j0 : panel_rows;
    // The next panel's rows; in the x16 layout, the 16-row groups that hold them.
    const int first = kX16 ? next_j0 / kPackRows : next_j0;
    const int rows = next_nc <= 0 ? 0
                     : kX16       ? (next_j0 + next_nc + kPackRows - 1) / kPackRows - first
                                  : next_nc;
    RowPrefetcher next_weights(t.w + static_cast<size_t>(first) * t.w_row_bytes, t.w_row_bytes,
                               rows, t.w_row_bytes, m_tiles * k_blocks * row_tiles);
    for (int i0 = 0; i0 < t.m; i0 += kPackMr) {
      const int mr = t.m - i0 < kPackMr ? t.m - i0 : kPackMr;
      for (int kb0 = 0; kb0 < kv; kb0 += kKBlockVectors) {
        const int kbn = KBlockLength(kv, kb0);
        const PanelElement<T>* w_block =
            w_panel + static_cast<size_t>(kb0) * row_tiles * kPackNr * kLanes;
        // x_rows[r]: vector kb0 of tile row r; its vector kb0 + v is v * x_vector_floats further.
        const float* x_rows[kPackMr];
        int x_vector_floats;
        // The next activation block (the same rows' next k block, or the next row tile's first)
        // is fetched into L1 a slice per weight tile while this one is in use. Copied: it follows
        // this one in x_panel (or is the panel's first block). In place: its row r starts at
        // next_x_rows[r] and is next_kbn lines long.
        const size_t x_block_lines = static_cast<size_t>(kbn) * kPackMr;  // one line per vector
        const float* next_x_block = nullptr;
        const float* next_x_rows[kPackMr];
        int next_kbn = kbn;
        if (x_in_place) {
          x_vector_floats = kLanes;
          const bool next_rows = kb0 + kbn == kv;
          const int next_i0 = !next_rows ? i0 : i0 + kPackMr < t.m ? i0 + kPackMr : 0;
          const int next_kb0 = next_rows ? 0 : kb0 + kbn;
          if (kv - next_kb0 < next_kbn) next_kbn = kv - next_kb0;
          for (int r = 0; r < kPackMr; ++r) {
            // Rows past m repeat the last row: their sums are never stored.
            const int row = i0 + (r < mr ? r : mr - 1);
            x_rows[r] =
                reinterpret_cast<const float*>(t.x + static_cast<size_t>(row) * t.x_row_bytes) +
                static_cast<size_t>(kb0) * kLanes;
            const int next_row = next_i0 + r < t.m ? next_i0 + r : t.m - 1;
            next_x_rows[r] = reinterpret_cast<const float*>(t.x + static_cast<size_t>(next_row) *
                                                                      t.x_row_bytes) +
                             static_cast<size_t>(next_kb0) * kLanes;
          }
        } else {
          const float* x_block = x_panel + static_cast<size_t>(i0) * row_floats +
                                 static_cast<size_t>(kb0) * kPackMr * kLanes;
          x_vector_floats = kPackMr * kLanes;
          for (int r = 0; r < kPackMr; ++r) x_rows[r] = x_block + r * kLanes;
          next_x_block = x_block + x_block_lines * kLanes;
          if (kb0 + kbn == kv && i0 + kPackMr >= t.m) next_x_block = x_panel;
        }
        size_t lines_per_tile = (x_block_lines + row_tiles - 1) / row_tiles;
        if (lines_per_tile > static_cast<size_t>(kbn)) lines_per_tile = kbn;  // one per step
        for (int jt = 0; jt < row_tiles; ++jt) {
          next_weights.Step();
          const size_t first_line = jt * lines_per_tile;
          size_t lines = first_line >= x_block_lines                   ? 0
                         : x_block_lines - first_line < lines_per_tile ? x_block_lines - first_line
                                                                       : lines_per_tile;
          const float* prefetch = next_x_block + first_line * kLanes;
          if (x_in_place) {
            // Within one row only (lines that would cross into the next row are left to the
            // hardware prefetcher).
            const int row = static_cast<int>(first_line / kbn);
            const int line = static_cast<int>(first_line % kbn);
            if (row >= kPackMr || line >= next_kbn) {
              lines = 0;
              prefetch = next_x_rows[0];
            } else {
              if (lines > static_cast<size_t>(next_kbn - line)) lines = next_kbn - line;
              prefetch = next_x_rows[row] + static_cast<size_t>(line) * kLanes;
            }
          }
          const int nr = nc - jt * kPackNr < kPackNr ? nc - jt * kPackNr : kPackNr;
          const auto tile = mr > 4   ? PackedTile<T, 6>
                            : mr > 2 ? PackedTile<T, 4>
                                     : PackedTile<T, 2>;
          tile(x_rows, x_vector_floats, w_block + static_cast<size_t>(jt) * kbn * kPackNr * kLanes,
               kbn, spills + static_cast<size_t>(jt) * kPackMr * kPackNr * kLanes, kb0 == 0,
               kb0 + kbn == kv, t.y + static_cast<size_t>(i0) * t.ldy + j0 + jt * kPackNr, t.ldy,
               mr, nr, prefetch, static_cast<int>(lines));
        }
      }
    }
  }
}

// More than one activation row, on stored rows or the x16 layout.
template <WType T, bool kX16>
void MatmulFloatRows(const MatmulTile& t) {
  if (t.m >= kMinPackedRows && t.k > 0) {
    MatmulFloatPacked<T, kX16>(t);
    return;
  }
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

template <WType T, PrefetchLevel L = PrefetchLevel::kL1>
void MatmulFloat(const MatmulTile& t) {
  assert(t.m >= 0 && t.k >= 0 && t.n_begin <= t.n_end);
  if (t.m == 1) {
    WalkTiles<1, kNrDecode>(
        1, t.n_begin, t.n_end, 1, [](int, int) {},
        [&](int i0, int, int j0, int nr) {
          if (nr == kNrDecode) {
            FloatTile<T, 1, kNrDecode, L>(t, i0, j0);
          } else {
            FloatTile<T, 1, 1>(t, i0, j0);
          }
        });
    return;
  }
  MatmulFloatRows<T, false>(t);
}

// Decode (one activation row) on the x16 layout: a group's 16 rows in one pass, so each step reads
// the next 16 vectors of one forward stream (512 bytes of F16). kAheadL2: each step also prefetches
// its bytes' lines kPrefetchAheadBytes<kL2> further on into L2 (the alternative the decode tile
// chooser times; on a Zen 4 VM the hardware prefetcher alone read this stream fastest). Every
// row's sum is FloatTile's (one accumulator, increasing k, the zero-padded last vector, HSum's
// tree through TransposedHalvingSum16).
template <WType T, bool kAheadL2>
void X16DecodeTile(const MatmulTile& t, int j0) {
  static_assert(kPackRows == kLanes, "one accumulator per row of a group, summed 16 at once");
  using Rows = WeightRows<T, true>;
  const uint8_t* step = Rows::Row(t, j0);
  const float* x = reinterpret_cast<const float*>(t.x);
  __m512 acc[kLanes];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  int kk = 0;
  for (; kk + kLanes <= t.k; kk += kLanes, step += Rows::kStep) {
    if constexpr (kAheadL2) PrefetchLinesAhead<PrefetchLevel::kL2>(step, Rows::kStep);
    const __m512 xv = _mm512_loadu_ps(x + kk);
    for (int c = 0; c < kLanes; ++c) {
      acc[c] = _mm512_fmadd_ps(LoadW<T>(step + c * Rows::kVectorBytes), xv, acc[c]);
    }
  }
  if (kk < t.k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (t.k - kk)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + kk);
    for (int c = 0; c < kLanes; ++c) {
      acc[c] = _mm512_fmadd_ps(LoadWMasked<T>(step + c * Rows::kVectorBytes, mask), xv, acc[c]);
    }
  }
  // TransposedHalvingSum16 leaves row q's sum in chunk q % 4, lane q / 4: gather them in order.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512 sums = _mm512_permutexvar_ps(order, TransposedHalvingSum16(acc));
  const int rows = t.n_end - j0 < kLanes ? t.n_end - j0 : kLanes;
  _mm512_mask_storeu_ps(t.y + j0, static_cast<__mmask16>((1u << rows) - 1), sums);
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

}  // namespace

void MatmulF32(const MatmulTile& t) { MatmulFloat<WType::kF32>(t); }
void MatmulF16(const MatmulTile& t) { MatmulFloat<WType::kF16>(t); }
void MatmulBf16(const MatmulTile& t) { MatmulFloat<WType::kBf16>(t); }
void MatmulF32L2(const MatmulTile& t) { MatmulFloat<WType::kF32, PrefetchLevel::kL2>(t); }
void MatmulF16L2(const MatmulTile& t) { MatmulFloat<WType::kF16, PrefetchLevel::kL2>(t); }
void MatmulBf16L2(const MatmulTile& t) { MatmulFloat<WType::kBf16, PrefetchLevel::kL2>(t); }
void MatmulF32X16(const MatmulTile& t) { MatmulFloatX16<WType::kF32>(t); }
void MatmulF16X16(const MatmulTile& t) { MatmulFloatX16<WType::kF16>(t); }
void MatmulBf16X16(const MatmulTile& t) { MatmulFloatX16<WType::kBf16>(t); }
void MatmulF32X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kF32, true>(t); }
void MatmulF16X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kF16, true>(t); }
void MatmulBf16X16L2(const MatmulTile& t) { MatmulFloatX16<WType::kBf16, true>(t); }

}  // namespace kvserve::avx512
