// AVX2 attend_head: the arithmetic of attend_head.h with every 16-lane accumulator held as two
// 8-lane halves (lanes 0-7 and 8-15), so HSum's first step (lane l + 8) is one add of the halves.
// Scores go 8 keys at a time: a transposed tree then performs, for every key, the rest of HSum's
// additions (lanes l + 4, l + 2, l + 1), so the 8 scores come out in one vector. The exp runs 8
// lanes at a time; the value pass is an FMA chain per 8-wide output vector.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why). The
// reductions and the exp pass are shared with the quantized-KV kernel (attend_reduce_avx2.h).
#include <immintrin.h>

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attend_reduce_avx2.h"

namespace kvserve::avx2 {

namespace {

// The 8 elements of a K or V row from element d on, as floats. Only the first n (0 <= n <= 8) are
// read; the lanes from n on are zero. The 16-bit types have no masked load in AVX2, so a partial
// chunk goes through a zeroed copy.
template <KvType T>
inline __m256 LoadKv(const uint8_t* row, int d, int n) {
  if constexpr (T == KvType::kF32) {
    const float* at = reinterpret_cast<const float*>(row) + d;
    return n >= kLanes ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, LaneMask(n));
  } else {
    const uint8_t* at = row + 2 * static_cast<size_t>(d);
    __m128i h;
    if (n >= kLanes) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    } else {
      alignas(16) uint16_t part[kLanes] = {};
      std::memcpy(part, at, 2 * static_cast<size_t>(n));
      h = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
    }
    if constexpr (T == KvType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// Scores of all keys into job.scores (8 at a time); returns their maximum. kVec = head_dim / 16
// rounded up; chunks past head_dim hold zeros in q and K, as the contract's padding.
template <KvType T, int kVec>
float ScoreKeys(const AttendJob& job, Tail tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
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
#pragma GCC unroll 16
      for (int v = 0; v < kVec; ++v) {
        const int c = 2 * v;
        lo = _mm256_fmadd_ps(q[c], LoadKv<T>(row, kLanes * c, ChunkLength<kVec>(c, tail)), lo);
        hi = _mm256_fmadd_ps(q[c + 1],
                             LoadKv<T>(row, kLanes * (c + 1), ChunkLength<kVec>(c + 1, tail)), hi);
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
  // The last chunk may lie wholly past head_dim; it is then neither computed nor stored.
  const int n_chunks = tail.hi > 0 ? 2 * kVec : 2 * kVec - 1;
  __m256 out[2 * kVec];
  for (int c = 0; c < 2 * kVec; ++c) out[c] = _mm256_setzero_ps();
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p = 0; p < count; ++p) {
    const __m256 weight = _mm256_set1_ps(job.scores[p] * inv_sum);
    const uint8_t* row = job.v + walk.Next();
#pragma GCC unroll 32
    for (int c = 0; c < 2 * kVec; ++c) {
      if (c >= n_chunks) break;
      out[c] =
          _mm256_fmadd_ps(weight, LoadKv<T>(row, kLanes * c, ChunkLength<kVec>(c, tail)), out[c]);
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

void AttendHead(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  const int n_vec = (job.head_dim + kAccLanes - 1) / kAccLanes;
  switch (job.type) {
    case KvType::kF32:
      return AttendWidth<KvType::kF32>(job, n_vec);
    case KvType::kF16:
      return AttendWidth<KvType::kF16>(job, n_vec);
    case KvType::kBF16:
      return AttendWidth<KvType::kBF16>(job, n_vec);
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      return AttendHeadQuant(job);
  }
}

void AttendGroup(std::span<const AttendJob> jobs) {
  for (const AttendJob& job : jobs) AttendHead(job);
}

}  // namespace kvserve::avx2
