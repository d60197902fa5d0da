// AVX-512 tiles of Q2_K, Q3_K, Q4_K, Q5_K and Q6_K weights against Q8_K activations
// (kquant_tiles.h): the scalar tiles' bits, for every m and output range.
//
// Per weight row and super-block, the 256 weights are unpacked once into four vectors of 64
// unsigned bytes in element order (Q2_K: 0 .. 3; Q3_K: the value q + 4, 0 .. 7; Q4_K: the nibble,
// 0 .. 15; Q5_K: 0 .. 31; Q6_K: the stored 6-bit value q + 32, 0 .. 63) and four vectors of int16
// sub-block scales, one per element pair. Each activation row of the tile then takes, per vector,
// vpmaddubsw (unsigned weight times signed activation, in int16 pairs of at most 2 * 63 * 128 =
// 16128, so none saturates) and vpdpwssd with the scales (exact int32 sums). Q6_K's offset comes
// back as -32 * Σ_s scale_s * bsum_s (Q3_K's as -4 * ...), the min term of Q2_K, Q4_K and Q5_K as
// msum = Σ_s min_s * bsum_s, both by vpmaddwd on the activation's bsums. One horizontal sum per
// super-block gives the exact isum; the float part is the scalar tile's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/ggml_blocks.h"
#include "util/half.h"

namespace kvserve::avx512 {

namespace {

// Activation rows per pass over a weight row: each super-block is unpacked once per pass.
constexpr int kMr = 8;

enum class KType { kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K };

template <KType T>
constexpr size_t kBlockBytes = T == KType::kQ2_K   ? sizeof(BlockQ2_K)
                               : T == KType::kQ3_K ? sizeof(BlockQ3_K)
                               : T == KType::kQ4_K ? sizeof(BlockQ4_K)
                               : T == KType::kQ5_K ? sizeof(BlockQ5_K)
                                                   : sizeof(BlockQ6_K);
// Types whose weights are stored with an offset (Q3_K: q + 4, Q6_K: q + 32) rather than a min.
template <KType T>
constexpr bool kOffsetType = T == KType::kQ3_K || T == KType::kQ6_K;

// One unpacked weight super-block.
struct WBlock {
  __m512i q[4];      // unsigned weights of elements 64p .. 64p + 63
  __m512i scale[4];  // int16 lane l: the scale of elements 64p + 2l and 64p + 2l + 1
  __m256i bsum_w;    // int16 lane g: the factor of bsums[g] (Q4_K/Q5_K: min; Q6_K: -32 * scale)
  float d;
  float dmin;
};

// v as one rounded float. C++ compiles with -ffp-contract=fast, so GCC would fuse a product and a
// sum into an FMA here (FMA is enabled), where the scalar tile (no FMA) rounds the product.
inline float Rounded(float v) {
  asm("" : "+x"(v));
  return v;
}

inline __m512i TwoHalves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(lo)),
                            _mm256_set1_epi16(static_cast<int16_t>(hi)), 1);
}

inline __m256i Load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Q4_K and Q5_K: sub-blocks of 32 with 6-bit scales and mins; vector p holds sub-blocks 2p (low
// nibbles of quants[32p .. 32p + 32)) and 2p + 1 (their high nibbles).
template <KType T>
inline void UnpackK4(const uint8_t* p, WBlock& w) {
  using Block = std::conditional_t<T == KType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  const uint8_t* quants = p + offsetof(Block, quants);
  int8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) ScaleMinK4(p + offsetof(Block, scales), s, &sc[s], &mn[s]);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int v = 0; v < 4; ++v) {
    __m512i q = _mm512_broadcast_i64x4(Load256(quants + 32 * v));
    q = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xffff0000u, q, 4), low4);
    if constexpr (T == KType::kQ5_K) {
      // Bit 4 of element l of sub-block s is bit s of qh[l].
      const __m512i qh = _mm512_broadcast_i64x4(Load256(p + offsetof(BlockQ5_K, qh)));
      const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(qh, TwoHalves16(2 * v, 2 * v + 1)),
                                           _mm512_set1_epi8(1));
      q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 4));
    }
    w.q[v] = q;
    w.scale[v] = TwoHalves16(sc[2 * v], sc[2 * v + 1]);
  }
  w.bsum_w = _mm256_setr_epi16(mn[0], mn[0], mn[1], mn[1], mn[2], mn[2], mn[3], mn[3], mn[4], mn[4],
                               mn[5], mn[5], mn[6], mn[6], mn[7], mn[7]);
  w.d = Fp16ToFloat(LoadU16(p + offsetof(Block, d)));
  w.dmin = Fp16ToFloat(LoadU16(p + offsetof(Block, dmin)));
}

// Q6_K: sub-blocks of 16 with int8 scales. Vector p = 2n + h holds elements 128n + 64h + [0, 64):
// j = 2h in its lower half, j = 2h + 1 in its upper half (the layout of ggml_type.h).
inline void UnpackQ6_K(const uint8_t* p, WBlock& w) {
  const uint8_t* ql = p + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = p + offsetof(BlockQ6_K, qh);
  alignas(64) static constexpr int16_t kSubOfPair[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                                         1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                         2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  const __m512i sub_of_pair = _mm512_load_si512(kSubOfPair);
  const __m256i sc16 = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ6_K, scales))));
  for (int v = 0; v < 4; ++v) {
    const int n = v / 2, h = v % 2;
    __m512i low = _mm512_loadu_si512(ql + 64 * n);
    if (h == 1) low = _mm512_srli_epi16(low, 4);
    low = _mm512_and_si512(low, _mm512_set1_epi8(0x0f));
    const __m512i high =
        _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(Load256(qh + 32 * n)),
                                           TwoHalves16(4 * h, 4 * h + 2)),
                         _mm512_set1_epi8(3));
    w.q[v] = _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
    w.scale[v] = _mm512_permutexvar_epi16(_mm512_add_epi16(sub_of_pair, _mm512_set1_epi16(4 * v)),
                                          _mm512_zextsi256_si512(sc16));
  }
  w.bsum_w = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
  w.d = Fp16ToFloat(LoadU16(p + offsetof(BlockQ6_K, d)));
  w.dmin = 0.0f;
}

// Q2_K and Q3_K: sub-blocks of 16; the 2-bit part of element 128c + 32j + l is bits 2j, 2j + 1
// of quants[32c + l], so vector v (elements 64v .. 64v + 63) takes quants[32(v / 2) ..] shifted by
// 4(v % 2) (lower half) and 4(v % 2) + 2 (upper half). Q3_K's third bit of that element is bit
// 4c + j of hmask[l]: bit 2v (lower half), 2v + 1 (upper) for vector v. sc16: the 16 sub-block
// scales as int16.
template <KType T>
inline void UnpackK16(const uint8_t* p, __m256i sc16, WBlock& w) {
  using Block = std::conditional_t<T == KType::kQ2_K, BlockQ2_K, BlockQ3_K>;
  const uint8_t* quants = p + offsetof(Block, quants);
  alignas(64) static constexpr int16_t kSubOfPair[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                                         1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                         2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  const __m512i sub_of_pair = _mm512_load_si512(kSubOfPair);
  for (int v = 0; v < 4; ++v) {
    const __m512i bytes = _mm512_broadcast_i64x4(Load256(quants + 32 * (v / 2)));
    __m512i q = _mm512_and_si512(
        _mm512_srlv_epi16(bytes, TwoHalves16(4 * (v % 2), 4 * (v % 2) + 2)), _mm512_set1_epi8(3));
    if constexpr (T == KType::kQ3_K) {
      const __m512i hmask = _mm512_broadcast_i64x4(Load256(p + offsetof(BlockQ3_K, hmask)));
      const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hmask, TwoHalves16(2 * v, 2 * v + 1)),
                                           _mm512_set1_epi8(1));
      q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 2));
    }
    w.q[v] = q;
    w.scale[v] = _mm512_permutexvar_epi16(_mm512_add_epi16(sub_of_pair, _mm512_set1_epi16(4 * v)),
                                          _mm512_zextsi256_si512(sc16));
  }
}

inline void UnpackQ2_K(const uint8_t* p, WBlock& w) {
  const __m256i packed = _mm256_cvtepu8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ2_K, scales))));
  UnpackK16<KType::kQ2_K>(p, _mm256_and_si256(packed, _mm256_set1_epi16(0x0f)), w);
  w.bsum_w = _mm256_srli_epi16(packed, 4);  // the mins
  w.d = Fp16ToFloat(LoadU16(p + offsetof(BlockQ2_K, d)));
  w.dmin = Fp16ToFloat(LoadU16(p + offsetof(BlockQ2_K, dmin)));
}

inline void UnpackQ3_K(const uint8_t* p, WBlock& w) {
  const uint8_t* scales = p + offsetof(BlockQ3_K, scales);
  alignas(32) int16_t sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = static_cast<int16_t>(ScaleQ3_K(scales, s));
  const __m256i sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
  UnpackK16<KType::kQ3_K>(p, sc16, w);
  w.bsum_w = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 2));
  w.d = Fp16ToFloat(LoadU16(p + offsetof(BlockQ3_K, d)));
  w.dmin = 0.0f;
}

template <KType T>
inline void Unpack(const uint8_t* p, WBlock& w) {
  if constexpr (T == KType::kQ6_K) {
    UnpackQ6_K(p, w);
  } else if constexpr (T == KType::kQ2_K) {
    UnpackQ2_K(p, w);
  } else if constexpr (T == KType::kQ3_K) {
    UnpackQ3_K(p, w);
  } else {
    UnpackK4<T>(p, w);
  }
}

inline int ReduceAdd256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// sum + this super-block's contribution against Q8_K block xb, as the scalar tile computes it.
template <KType T>
inline float BlockStep(float sum, const WBlock& w, const uint8_t* xb) {
  const uint8_t* xq = xb + offsetof(BlockQ8_K, quants);
  __m512i acc = _mm512_setzero_si512();
  for (int v = 0; v < 4; ++v) {
    const __m512i pairs = _mm512_maddubs_epi16(w.q[v], _mm512_loadu_si512(xq + 64 * v));
    acc = _mm512_dpwssd_epi32(acc, pairs, w.scale[v]);
  }
  const __m256i bterm = _mm256_madd_epi16(Load256(xb + offsetof(BlockQ8_K, bsums)), w.bsum_w);
  float dx;
  std::memcpy(&dx, xb + offsetof(BlockQ8_K, d), sizeof(dx));
  if constexpr (kOffsetType<T>) {
    const int isum = _mm512_reduce_add_epi32(_mm512_add_epi32(acc, _mm512_zextsi256_si512(bterm)));
    return sum + Rounded(static_cast<float>(isum) * Rounded(w.d * dx));
  } else {
    const int isum = _mm512_reduce_add_epi32(acc);
    const int msum = ReduceAdd256(bterm);
    float block = Rounded(static_cast<float>(isum) * Rounded(w.d * dx));
    block = Rounded(block - Rounded(static_cast<float>(msum) * Rounded(w.dmin * dx)));
    return sum + block;
  }
}

template <KType T>
void MatmulK(const MatmulTile& t) {
  const int n_blocks = t.k / 256;
  for (int j = t.n_begin; j < t.n_end; ++j) {
    const uint8_t* w_row = t.w + static_cast<size_t>(j) * t.w_row_bytes;
    for (int i0 = 0; i0 < t.m; i0 += kMr) {
      const int rows = std::min(kMr, t.m - i0);
      const uint8_t* x = t.x + static_cast<size_t>(i0) * t.x_row_bytes;
      float sum[kMr] = {};
      for (int b = 0; b < n_blocks; ++b) {
        WBlock w;
        Unpack<T>(w_row + kBlockBytes<T> * b, w);
        const uint8_t* xb = x + sizeof(BlockQ8_K) * b;
        for (int r = 0; r < rows; ++r) sum[r] = BlockStep<T>(sum[r], w, xb + r * t.x_row_bytes);
      }
      for (int r = 0; r < rows; ++r) t.y[static_cast<size_t>(i0 + r) * t.ldy + j] = sum[r];
    }
  }
}

}  // namespace

void MatmulQ2_K(const MatmulTile& t) { MatmulK<KType::kQ2_K>(t); }
void MatmulQ3_K(const MatmulTile& t) { MatmulK<KType::kQ3_K>(t); }
void MatmulQ4_K(const MatmulTile& t) { MatmulK<KType::kQ4_K>(t); }
void MatmulQ5_K(const MatmulTile& t) { MatmulK<KType::kQ5_K>(t); }
void MatmulQ6_K(const MatmulTile& t) { MatmulK<KType::kQ6_K>(t); }

}  // namespace kvserve::avx512
