// AVX2 tiles of Q2_K, Q3_K, Q4_K, Q5_K and Q6_K weights against Q8_K activations (kquant_tiles.h):
// the scalar tiles' bits, for every m and output range. The AVX-VNNI table uses them too.
//
// The scheme of kquant_tiles_avx512.cc on 256 bits: per weight row and super-block, the 256
// weights are unpacked once into eight vectors of 32 unsigned bytes in element order (Q2_K: 0 .. 3;
// Q3_K: q + 4, 0 .. 7; Q4_K: the nibble, 0 .. 15; Q5_K: 0 .. 31; Q6_K: the stored 6-bit value
// q + 32, 0 .. 63) and eight vectors
// of int16 sub-block scales, one per element pair. Per activation row and vector, vpmaddubsw
// (int16 pairs of at most 2 * 63 * 128 = 16128, none saturates) and vpmaddwd with the scales give
// exact int32 sums. Q6_K's offset comes back as -32 * Σ_s scale_s * bsum_s (Q3_K's as -4 * ...),
// the min term of Q2_K, Q4_K and Q5_K as msum = Σ_s min_s * bsum_s, by vpmaddwd on the activation's
// bsums. One horizontal sum per super-block gives the exact isum; the float part is the scalar
// tile's.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/kquant_tiles.h"
#include "kernels/ggml_blocks.h"
#include "util/half.h"

namespace kvserve::avx2 {

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
  __m256i q[8];      // unsigned weights of elements 32v .. 32v + 31
  __m256i scale[8];  // int16 lane l: the scale of elements 32v + 2l and 32v + 2l + 1
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

inline __m256i Load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m256i ShiftRight16(__m256i v, int bits) {
  return _mm256_srl_epi16(v, _mm_cvtsi32_si128(bits));
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Q4_K and Q5_K: sub-blocks of 32 with 6-bit scales and mins; sub-block 2c is the low nibbles of
// quants[32c .. 32c + 32), 2c + 1 their high nibbles.
template <KType T>
inline void UnpackK4(const uint8_t* p, WBlock& w) {
  using Block = std::conditional_t<T == KType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  const uint8_t* quants = p + offsetof(Block, quants);
  int8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) ScaleMinK4(p + offsetof(Block, scales), s, &sc[s], &mn[s]);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i bytes = Load256(quants + 32 * c);
    w.q[2 * c] = _mm256_and_si256(bytes, low4);
    w.q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
  }
  if constexpr (T == KType::kQ5_K) {
    // Bit 4 of element l of sub-block s is bit s of qh[l].
    const __m256i qh = Load256(p + offsetof(BlockQ5_K, qh));
    for (int s = 0; s < 8; ++s) {
      const __m256i bit = _mm256_and_si256(ShiftRight16(qh, s), _mm256_set1_epi8(1));
      w.q[s] = _mm256_or_si256(w.q[s], _mm256_slli_epi16(bit, 4));
    }
  }
  for (int s = 0; s < 8; ++s) w.scale[s] = _mm256_set1_epi16(sc[s]);
  w.bsum_w = _mm256_setr_epi16(mn[0], mn[0], mn[1], mn[1], mn[2], mn[2], mn[3], mn[3], mn[4], mn[4],
                               mn[5], mn[5], mn[6], mn[6], mn[7], mn[7]);
  w.d = Fp16ToFloat(LoadU16(p + offsetof(Block, d)));
  w.dmin = Fp16ToFloat(LoadU16(p + offsetof(Block, dmin)));
}

// Q6_K: sub-blocks of 16 with int8 scales. Vector v = 4n + j holds elements 128n + 32j + [0, 32)
// (the layout of ggml_type.h), sub-blocks 2v (lanes 0 .. 7) and 2v + 1 (lanes 8 .. 15).
inline void UnpackQ6_K(const uint8_t* p, WBlock& w) {
  const uint8_t* ql = p + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = p + offsetof(BlockQ6_K, qh);
  const int8_t* scales = reinterpret_cast<const int8_t*>(p + offsetof(BlockQ6_K, scales));
  for (int v = 0; v < 8; ++v) {
    const int n = v / 4, j = v % 4;
    const __m256i low = _mm256_and_si256(
        ShiftRight16(Load256(ql + 64 * n + 32 * (j & 1)), 4 * (j / 2)), _mm256_set1_epi8(0x0f));
    const __m256i high =
        _mm256_and_si256(ShiftRight16(Load256(qh + 32 * n), 2 * j), _mm256_set1_epi8(3));
    w.q[v] = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    w.scale[v] = _mm256_set_m128i(_mm_set1_epi16(scales[2 * v + 1]), _mm_set1_epi16(scales[2 * v]));
  }
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  w.bsum_w = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
  w.d = Fp16ToFloat(LoadU16(p + offsetof(BlockQ6_K, d)));
  w.dmin = 0.0f;
}

// Q2_K and Q3_K: sub-blocks of 16; vector v = 4c + j (elements 128c + 32j + [0, 32)) is bits 2j,
// 2j + 1 of quants[32c ..], and Q3_K's third bit is bit v of hmask[l]. sc: the 16 scales.
template <KType T>
inline void UnpackK16(const uint8_t* p, const int16_t sc[16], WBlock& w) {
  using Block = std::conditional_t<T == KType::kQ2_K, BlockQ2_K, BlockQ3_K>;
  const uint8_t* quants = p + offsetof(Block, quants);
  for (int v = 0; v < 8; ++v) {
    __m256i q = _mm256_and_si256(ShiftRight16(Load256(quants + 32 * (v / 4)), 2 * (v % 4)),
                                 _mm256_set1_epi8(3));
    if constexpr (T == KType::kQ3_K) {
      const __m256i bit = _mm256_and_si256(ShiftRight16(Load256(p + offsetof(BlockQ3_K, hmask)), v),
                                           _mm256_set1_epi8(1));
      q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 2));
    }
    w.q[v] = q;
    w.scale[v] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * v + 1]), _mm_set1_epi16(sc[2 * v]));
  }
}

inline void UnpackQ2_K(const uint8_t* p, WBlock& w) {
  const uint8_t* scales = p + offsetof(BlockQ2_K, scales);
  int16_t sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = static_cast<int16_t>(scales[s] & 0x0f);
  UnpackK16<KType::kQ2_K>(p, sc, w);
  w.bsum_w = _mm256_srli_epi16(
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales))), 4);
  w.d = Fp16ToFloat(LoadU16(p + offsetof(BlockQ2_K, d)));
  w.dmin = Fp16ToFloat(LoadU16(p + offsetof(BlockQ2_K, dmin)));
}

inline void UnpackQ3_K(const uint8_t* p, WBlock& w) {
  const uint8_t* scales = p + offsetof(BlockQ3_K, scales);
  alignas(32) int16_t sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = static_cast<int16_t>(ScaleQ3_K(scales, s));
  UnpackK16<KType::kQ3_K>(p, sc, w);
  const __m256i sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
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
  __m256i acc = _mm256_setzero_si256();
  for (int v = 0; v < 8; ++v) {
    const __m256i pairs = _mm256_maddubs_epi16(w.q[v], Load256(xq + 32 * v));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, w.scale[v]));
  }
  const __m256i bterm = _mm256_madd_epi16(Load256(xb + offsetof(BlockQ8_K, bsums)), w.bsum_w);
  float dx;
  std::memcpy(&dx, xb + offsetof(BlockQ8_K, d), sizeof(dx));
  if constexpr (kOffsetType<T>) {
    const int isum = ReduceAdd256(_mm256_add_epi32(acc, bterm));
    return sum + Rounded(static_cast<float>(isum) * Rounded(w.d * dx));
  } else {
    const int isum = ReduceAdd256(acc);
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

}  // namespace kvserve::avx2
