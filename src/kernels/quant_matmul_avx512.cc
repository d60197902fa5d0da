// AVX-512 VNNI tiles for Q8_0 / Q4_0 weights against Q8_0 activations.
//
// Accumulation order of y[i][j] (the determinism contract of kernels.h): blocks are taken in pairs
// (0,1), (2,3), ... (a last odd block is paired with an all-zero block of scale 0). For a pair,
// vpdpbusd yields 16 exact int32 partial sums, lanes 0-7 from the first block and 8-15 from the
// second (4 products per lane); each lane is converted to float and fused-multiply-added, times
// dw * dx of its block, into that lane of one 16-lane float accumulator. After the last pair the
// lanes are added by HSum's fixed tree. Nothing depends on m, on the n range, or on the tile shape.
//
// The sign trick: vpdpbusd multiplies unsigned by signed bytes. The weights are made unsigned by an
// offset (Q8_0: w + 128, stored as w ^ 0x80; Q4_0: the raw nibble, w + 8, see LoadWPair for the
// high nibbles), and the activation side
// carries the correction: each lane's accumulator starts at -offset * (sum of its 4 activation
// quants), so the integer sums are exact for any quants, -128 included.
//
// Activation rows are repacked once per block of rows (XPair below) into a thread-local buffer, so
// the inner loop loads each activation vector, correction and scale with one instruction.
// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsic headers as
// uninitialized (GCC bug 105593); the warnings point into the header, so silence them there only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/quant_matmul.h"
#include "kernels/tile_walk.h"

namespace kvserve::avx512 {

namespace {

// Register tile for m > 1 (16 accumulators) and for m == 1 (8 weight rows side by side).
constexpr int kMr = 4;
constexpr int kNr = 4;
constexpr int kNrDecode = 8;
// Repacked activation rows per block: about this many bytes, so the block stays in L2.
constexpr size_t kXBlockBytes = 512 << 10;

// Two consecutive Q8_0 activation blocks, repacked. 192 bytes.
struct alignas(64) XPair {
  int8_t q[64];          // quants of block 2p, then of block 2p + 1 (zeros if absent)
  int32_t neg_corr[16];  // per lane: -offset * (sum of the lane's 4 quants)
  float scale[16];       // dx of block 2p in lanes 0-7, of block 2p + 1 in lanes 8-15
};
static_assert(sizeof(XPair) == 192);

// A growable 64-byte-aligned buffer, one per thread. Freed at thread exit.
class Scratch {
 public:
  ~Scratch() { std::free(data_); }
  XPair* Get(size_t count) {
    if (count > count_) {
      std::free(data_);
      data_ = static_cast<XPair*>(std::aligned_alloc(alignof(XPair), count * sizeof(XPair)));
      count_ = data_ != nullptr ? count : 0;
    }
    return data_;
  }

 private:
  XPair* data_ = nullptr;
  size_t count_ = 0;
};

thread_local Scratch tls_scratch;

inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline uint16_t ScaleBits(const uint8_t* block) {
  uint16_t s;
  std::memcpy(&s, block, sizeof(s));
  return s;
}

// [s0 x 8, s1 x 8] as floats, from two f16 scales.
inline __m512 PairScale(uint16_t s0, uint16_t s1) {
  const __m256i h = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s1)),
                                     _mm_set1_epi16(static_cast<short>(s0)));
  return _mm512_cvtph_ps(h);
}

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i Load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

enum class QType { kQ8_0, kQ4_0 };

// Repacks activation row x (n_blocks Q8_0 blocks) into (n_blocks + 1) / 2 pairs, for weights of
// type Q (see LoadWPair for the lane layout the corrections and scales must match).
template <QType Q>
void RepackRow(const uint8_t* x, int n_blocks, XPair* out) {
  // Per 128-bit lane (16 elements): the weight offset, and the factor the lane's scale carries.
  // Q4_0 high nibbles stay in place (16 * nibble), so their lanes carry 16 * 8 and 1/16; the
  // integer sums are then 16 times the true ones and the products identical (powers of two).
  const __m512i offset_bytes =
      Q == QType::kQ8_0
          ? _mm512_set1_epi8(static_cast<char>(128))
          : _mm512_set_epi32(0x80808080, 0x80808080, 0x80808080, 0x80808080, 0x08080808, 0x08080808,
                             0x08080808, 0x08080808, 0x80808080, 0x80808080, 0x80808080, 0x80808080,
                             0x08080808, 0x08080808, 0x08080808, 0x08080808);
  const __m512 lane_factor = Q == QType::kQ8_0
                                 ? _mm512_set1_ps(1.0f)
                                 : _mm512_set_ps(0.0625f, 0.0625f, 0.0625f, 0.0625f, 1, 1, 1, 1,
                                                 0.0625f, 0.0625f, 0.0625f, 0.0625f, 1, 1, 1, 1);
  for (int p = 0; 2 * p < n_blocks; ++p) {
    const uint8_t* b0 = x + sizeof(BlockQ8_0) * (2 * p);
    const uint8_t* b1 = b0 + sizeof(BlockQ8_0);
    const bool has_b1 = 2 * p + 1 < n_blocks;
    const __m256i lo = Load256(b0 + 2);
    const __m256i hi = has_b1 ? Load256(b1 + 2) : _mm256_setzero_si256();
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i corr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset_bytes, q);
    _mm512_store_si512(out[p].q, q);
    _mm512_store_si512(out[p].neg_corr, _mm512_sub_epi32(_mm512_setzero_si512(), corr));
    const __m512 scale = PairScale(ScaleBits(b0), has_b1 ? ScaleBits(b1) : 0);
    _mm512_store_ps(out[p].scale, _mm512_mul_ps(scale, lane_factor));
  }
}

template <QType Q>
constexpr size_t kBlockBytes = Q == QType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);

// The scales of weight pair p as [dw0 x 8, dw1 x 8]: one masked load of the two f16 words (no
// byte past the second scale is touched), one word permute, one conversion.
template <QType Q, bool kHalf>
inline __m512 WPairScale(const uint8_t* b0) {
  constexpr int kWord1 = static_cast<int>(kBlockBytes<Q> / 2);  // Q8_0: 17, Q4_0: 9
  constexpr __mmask32 kMask = kHalf ? 1u : (1u | (1u << kWord1));
  const __m512i words = _mm512_maskz_loadu_epi16(kMask, b0);
  const __m512i index = _mm512_zextsi256_si512(_mm256_setr_epi16(
      0, 0, 0, 0, 0, 0, 0, 0, kWord1, kWord1, kWord1, kWord1, kWord1, kWord1, kWord1, kWord1));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(index, words)));
}

// Weight pair p of row w as unsigned bytes and its scale vector. Q8_0: w + 128 (as w ^ 0x80), in
// element order. Q4_0, per 128-bit lane: low nibbles of block 2p (w + 8), its high nibbles in place
// (16 * (w + 8)), then the same for block 2p + 1; RepackRow<kQ4_0> matches the corrections and
// scales to this. kHalf: only block 2p exists; the second half is zero with scale 0.
template <QType Q, bool kHalf>
inline void LoadWPair(const uint8_t* w, int p, __m512i* quants, __m512* scale) {
  const uint8_t* b0 = w + kBlockBytes<Q> * (2 * p);
  const uint8_t* b1 = b0 + kBlockBytes<Q>;
  if constexpr (Q == QType::kQ8_0) {
    const __m256i hi = kHalf ? _mm256_setzero_si256() : Load256(b1 + 2);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(Load256(b0 + 2)), hi, 1);
    *quants = _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i q0 = _mm256_broadcastsi128_si256(Load128(b0 + 2));
    const __m256i q1 =
        kHalf ? _mm256_setzero_si256() : _mm256_broadcastsi128_si256(Load128(b1 + 2));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    const __m512i nibble_mask =
        _mm512_set_epi32(-0x0f0f0f10, -0x0f0f0f10, -0x0f0f0f10, -0x0f0f0f10, 0x0f0f0f0f, 0x0f0f0f0f,
                         0x0f0f0f0f, 0x0f0f0f0f, -0x0f0f0f10, -0x0f0f0f10, -0x0f0f0f10, -0x0f0f0f10,
                         0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f);
    *quants = _mm512_and_si512(q, nibble_mask);
  }
  *scale = WPairScale<Q, kHalf>(b0);
}

template <QType Q, int MR, int NR, bool kHalf>
inline void PairStep(const uint8_t* const* w, const XPair* const* x, int p, __m512 (*acc)[NR]) {
  __m512i wq[NR];
  __m512 ws[NR];
  for (int c = 0; c < NR; ++c) LoadWPair<Q, kHalf>(w[c], p, &wq[c], &ws[c]);
  for (int r = 0; r < MR; ++r) {
    const XPair& xp = x[r][p];
    const __m512i xq = _mm512_load_si512(xp.q);
    const __m512i nc = _mm512_load_si512(xp.neg_corr);
    const __m512 xs = _mm512_load_ps(xp.scale);
    for (int c = 0; c < NR; ++c) {
      const __m512i isum = _mm512_dpbusd_epi32(nc, wq[c], xq);
      acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws[c], xs), acc[r][c]);
    }
  }
}

// The activation rows of the current block, repacked: row i is at rows + (i - m0) * n_pairs.
struct Packed {
  const XPair* rows;
  int m0;
  int n_pairs;
};

template <QType Q, int MR, int NR>
void QuantTile(const MatmulTile& t, const Packed& packed, int i0, int j0) {
  const int n_blocks = t.k / 32;
  const uint8_t* w[NR];
  const XPair* x[MR];
  for (int c = 0; c < NR; ++c) w[c] = t.w + static_cast<size_t>(j0 + c) * t.w_row_bytes;
  for (int r = 0; r < MR; ++r) {
    x[r] = packed.rows + static_cast<size_t>(i0 + r - packed.m0) * packed.n_pairs;
  }
  __m512 acc[MR][NR];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const int full_pairs = n_blocks / 2;
  for (int p = 0; p < full_pairs; ++p) PairStep<Q, MR, NR, false>(w, x, p, acc);
  if (n_blocks % 2 != 0) PairStep<Q, MR, NR, true>(w, x, full_pairs, acc);
  for (int r = 0; r < MR; ++r) {
    float* y = t.y + static_cast<size_t>(i0 + r) * t.ldy + j0;
    for (int c = 0; c < NR; ++c) y[c] = HSum(acc[r][c]);
  }
}

template <QType Q, int NR>
void QuantTileRows(const MatmulTile& t, const Packed& packed, int i0, int mr, int j0) {
  switch (mr) {
    case 1:
      return QuantTile<Q, 1, NR>(t, packed, i0, j0);
    case 2:
      return QuantTile<Q, 2, NR>(t, packed, i0, j0);
    case 3:
      return QuantTile<Q, 3, NR>(t, packed, i0, j0);
    case 4:
      return QuantTile<Q, 4, NR>(t, packed, i0, j0);
  }
  assert(false && "QuantTileRows: bad row count");
}

template <QType Q>
void MatmulQuant(const MatmulTile& t) {
  assert(t.k % 32 == 0 && t.m >= 0 && t.n_begin <= t.n_end);
  const int n_blocks = t.k / 32;
  const int n_pairs = (n_blocks + 1) / 2;
  const size_t row_bytes = sizeof(XPair) * static_cast<size_t>(n_pairs > 0 ? n_pairs : 1);
  const int m_block = t.m == 1 ? 1 : static_cast<int>(kXBlockBytes / row_bytes / kMr * kMr);
  const int rows_per_block = m_block < kMr ? kMr : m_block;
  Packed packed{.rows = tls_scratch.Get(static_cast<size_t>(rows_per_block) * n_pairs + 1),
                .m0 = 0,
                .n_pairs = n_pairs};
  XPair* buffer = const_cast<XPair*>(packed.rows);
  assert(buffer != nullptr);
  const auto repack = [&](int m0, int m1) {
    packed.m0 = m0;
    for (int i = m0; i < m1; ++i) {
      RepackRow<Q>(t.x + static_cast<size_t>(i) * t.x_row_bytes, n_blocks,
                   buffer + static_cast<size_t>(i - m0) * n_pairs);
    }
  };
  if (t.m == 1) {
    WalkTiles<1, kNrDecode>(1, t.n_begin, t.n_end, 1, repack, [&](int i0, int, int j0, int nr) {
      if (nr == kNrDecode) {
        QuantTile<Q, 1, kNrDecode>(t, packed, i0, j0);
      } else {
        QuantTile<Q, 1, 1>(t, packed, i0, j0);
      }
    });
    return;
  }
  WalkTiles<kMr, kNr>(t.m, t.n_begin, t.n_end, m_block, repack,
                      [&](int i0, int mr, int j0, int nr) {
                        if (nr == kNr) {
                          QuantTileRows<Q, kNr>(t, packed, i0, mr, j0);
                        } else {
                          QuantTileRows<Q, 1>(t, packed, i0, mr, j0);
                        }
                      });
}

}  // namespace

void MatmulQ8_0(const MatmulTile& t) { MatmulQuant<QType::kQ8_0>(t); }
void MatmulQ4_0(const MatmulTile& t) { MatmulQuant<QType::kQ4_0>(t); }

}  // namespace kvserve::avx512
