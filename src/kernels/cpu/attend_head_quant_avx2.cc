// AVX2 attend_head for the quantized KV types (q8_0, q4_0): attend_head_avx2.cc's arithmetic (every
// 16-lane accumulator as two 8-lane halves) with every 8 elements of a K or V head row dequantized
// in registers (codes widened to int32, converted, times the group's f16 scale: exact, so the
// same values as DecodeKvHead). The reductions are attend_reduce_avx2.h's.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why).
#include <immintrin.h>

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attend_reduce_avx2.h"

namespace kvserve::avx2 {

namespace {

constexpr int kChunksPerGroup = kKvQuantGroup / kLanes;  // 8-lane chunks sharing one scale

// Where a head row's codes end and its scales begin (kv_format.h).
template <KvType T>
constexpr size_t CodeBytes(int head_dim) {
  return T == KvType::kQ4_0 ? (static_cast<size_t>(head_dim) + 1) / 2
                            : static_cast<size_t>(head_dim);
}

inline __m256 Scale(const uint8_t* scales, int group) {
  uint16_t h;
  std::memcpy(&h, scales + 2 * static_cast<size_t>(group), 2);
  return _mm256_set1_ps(_cvtsh_ss(h));
}

// Elements 8 c .. 8 c + 7 of a head row, dequantized; only the first n (n <= 8) are read, the
// lanes from n on are zero. A partial chunk goes through a zeroed copy (no masked byte loads).
template <KvType T>
inline __m256 LoadQuant(const uint8_t* row, int c, int n, __m256 scale) {
  if (n <= 0) return _mm256_setzero_ps();
  __m256i codes;
  if constexpr (T == KvType::kQ8_0) {
    const uint8_t* at = row + kLanes * static_cast<size_t>(c);
    int64_t bytes = 0;
    std::memcpy(&bytes, at, n >= kLanes ? kLanes : static_cast<size_t>(n));
    codes = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
  } else {
    const uint8_t* at = row + kLanes / 2 * static_cast<size_t>(c);
    int32_t bytes = 0;
    std::memcpy(&bytes, at, n >= kLanes ? kLanes / 2 : static_cast<size_t>(n + 1) / 2);
    const __m128i packed = _mm_cvtsi32_si128(bytes);
    const __m128i nibble = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(packed, nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    // Byte i holds elements 2i (low) and 2i + 1 (high): interleaved, they are in order.
    codes = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), _mm256_set1_epi32(8));
  }
  const __m256 value = _mm256_mul_ps(_mm256_cvtepi32_ps(codes), scale);
  return n >= kLanes ? value : _mm256_and_ps(_mm256_castsi256_ps(LaneMask(n)), value);
}

// Scores of all keys into job.scores (8 at a time); returns their maximum. kVec = head_dim / 16
// rounded up; chunks past head_dim hold zeros in q and K, as the contract's padding.
template <KvType T, int kVec>
float ScoreKeys(const AttendJob& job, Tail tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const size_t code_bytes = CodeBytes<T>(job.head_dim);
  __m256 q[2 * kVec];  // q[2v]: lanes 0-7 of accumulator vector v, q[2v + 1]: lanes 8-15
  for (int c = 0; c < 2 * kVec; ++c) {
    q[c] = _mm256_maskload_ps(job.q + kLanes * c, LaneMask(ChunkLength<kVec>(c, tail)));
  }
  const __m256 scale = _mm256_set1_ps(job.scale);
  const __m256 minus_infinity = _mm256_set1_ps(-INFINITY);
  __m256 max = minus_infinity;
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p0 = 0; p0 < count; p0 += kKeysPerStep) {
    const int n = count - p0 < kKeysPerStep ? count - p0 : kKeysPerStep;
    __m256 halves_added[kKeysPerStep];
#pragma GCC unroll 8
    for (int i = 0; i < kKeysPerStep; ++i) {
      halves_added[i] = _mm256_setzero_ps();
      if (i >= n) continue;
      const uint8_t* row = job.k + walk.Next();
      __m256 lo = _mm256_setzero_ps();
      __m256 hi = _mm256_setzero_ps();
      __m256 group_scale = _mm256_setzero_ps();
      for (int v = 0; v < kVec; ++v) {
        const int c = 2 * v;
        if (c % kChunksPerGroup == 0) group_scale = Scale(row + code_bytes, c / kChunksPerGroup);
        lo = _mm256_fmadd_ps(q[c], LoadQuant<T>(row, c, ChunkLength<kVec>(c, tail), group_scale),
                             lo);
        hi = _mm256_fmadd_ps(
            q[c + 1], LoadQuant<T>(row, c + 1, ChunkLength<kVec>(c + 1, tail), group_scale), hi);
      }
      halves_added[i] = _mm256_add_ps(lo, hi);
    }
    const __m256 scores = _mm256_mul_ps(TransposedHalvingSum(halves_added), scale);
    const __m256i live = LaneMask(n);
    _mm256_maskstore_ps(job.scores + p0, live, scores);
    // max_ps returns its second operand when the first is NaN, so NaN scores are skipped as
    // std::fmax skips them.
    const __m256 live_scores = _mm256_blendv_ps(minus_infinity, scores, _mm256_castsi256_ps(live));
    max = _mm256_max_ps(live_scores, max);
  }
  return MaxLane(max);
}

template <KvType T, int kVec>
void AccumulateValues(const AttendJob& job, float inv_sum, Tail tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const size_t code_bytes = CodeBytes<T>(job.head_dim);
  // The last chunk may lie wholly past head_dim; it is then neither computed nor stored.
  const int n_chunks = tail.hi > 0 ? 2 * kVec : 2 * kVec - 1;
  __m256 out[2 * kVec];
  for (int c = 0; c < 2 * kVec; ++c) out[c] = _mm256_setzero_ps();
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p = 0; p < count; ++p) {
    const __m256 weight = _mm256_set1_ps(job.scores[p] * inv_sum);
    const uint8_t* row = job.v + walk.Next();
    __m256 group_scale = _mm256_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) {
      if (c % kChunksPerGroup == 0) group_scale = Scale(row + code_bytes, c / kChunksPerGroup);
      out[c] = _mm256_fmadd_ps(
          weight, LoadQuant<T>(row, c, ChunkLength<kVec>(c, tail), group_scale), out[c]);
    }
  }
  for (int c = 0; c < n_chunks; ++c) {
    _mm256_maskstore_ps(job.out + kLanes * c, LaneMask(ChunkLength<kVec>(c, tail)), out[c]);
  }
}

template <KvType T, int kVec>
void AttendTyped(const AttendJob& job) {
  const int rest = job.head_dim - kAccLanes * (kVec - 1);  // 1 .. 16
  const Tail tail = {.lo = rest < kLanes ? rest : kLanes, .hi = rest > kLanes ? rest - kLanes : 0};
  const float inv_sum = SoftmaxInverseSum(job, ScoreKeys<T, kVec>(job, tail));
  AccumulateValues<T, kVec>(job, inv_sum, tail);
}

// Dispatches on head_dim / 16 rounded up (1 .. kMaxAttendHeadDim / 16) at compile time.
template <KvType T, int kVec = 1>
void AttendWidth(const AttendJob& job, int n_vec) {
  if constexpr (kVec <= kMaxAttendHeadDim / kAccLanes) {
    if (n_vec == kVec) return AttendTyped<T, kVec>(job);
    return AttendWidth<T, kVec + 1>(job, n_vec);
  }
}

}  // namespace

void AttendHeadQuant(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  const int n_vec = (job.head_dim + kAccLanes - 1) / kAccLanes;
  if (job.type == KvType::kQ8_0) return AttendWidth<KvType::kQ8_0>(job, n_vec);
  assert(job.type == KvType::kQ4_0);
  return AttendWidth<KvType::kQ4_0>(job, n_vec);
}

}  // namespace kvserve::avx2
