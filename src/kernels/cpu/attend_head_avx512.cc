// AVX-512 attend_head: the arithmetic of attend_head.h, 16 keys at a time. Each key's 16-lane
// score accumulator is reduced by a transposed halving tree that performs, for every key, the same
// additions as HSum (lanes l + 8, l + 4, l + 2, l + 1), so the 16 scores come out in one vector.
// The exp runs 16 lanes at a time; the value pass is an FMA chain per output vector.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why).
#include "kernels/cpu/immintrin_avx512.h"

#include <cassert>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/kv_exp_avx512.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = 16;

template <KvType T>
inline __m512 LoadKv(const uint8_t* row, int d, __mmask16 mask) {
  if constexpr (T == KvType::kF32) {
    return _mm512_maskz_loadu_ps(mask, row + 4 * static_cast<size_t>(d));
  } else if constexpr (T == KvType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + 2 * static_cast<size_t>(d)));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, row + 2 * static_cast<size_t>(d));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

inline __mmask16 LaneMask(int n) {
  return n >= kLanes ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// a[i] for i < 16 are 16 accumulators; returns v with v[i] = HSum(a[i]) (the same tree).
inline __m512 TransposedHalvingSum(const __m512 a[kLanes]) {
  __m512 s8[8];  // s8[p]: lanes 0-7 key 2p, lanes 8-15 key 2p + 1 (8 partial sums each)
  for (int p = 0; p < 8; ++p) {
    const __m512 x = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s8[p] = _mm512_add_ps(x, y);
  }
  __m512 s4[4];  // s4[p]: 128-bit chunk c holds key 4p + c (4 partial sums)
  for (int p = 0; p < 4; ++p) {
    const __m512 x = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 y = _mm512_shuffle_f32x4(s8[2 * p], s8[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1));
    s4[p] = _mm512_add_ps(x, y);
  }
  __m512 s2[2];  // s2[p]: chunk c holds keys 8p + c (lanes 0-1) and 8p + 4 + c (lanes 2-3)
  for (int p = 0; p < 2; ++p) {
    const __m512 x = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s2[p] = _mm512_add_ps(x, y);
  }
  // Chunk c, lane i: key c + 4 i.
  const __m512 x = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 y = _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1));
  const __m512 s1 = _mm512_add_ps(x, y);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, s1);
}

inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Scores of all keys into job.scores (16 at a time); returns their maximum. kVec = head_dim / 16
// rounded up; the last vector of q and of every K row is masked to head_dim.
template <KvType T, int kVec>
float ScoreKeys(const AttendJob& job, __mmask16 tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  __m512 q[kVec];
  for (int v = 0; v < kVec; ++v) {
    q[v] = _mm512_maskz_loadu_ps(v + 1 == kVec ? tail : 0xffff, job.q + kLanes * v);
  }
  const __m512 scale = _mm512_set1_ps(job.scale);
  __m512 max = _mm512_set1_ps(-INFINITY);
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p0 = 0; p0 < count; p0 += kLanes) {
    const int n = count - p0 < kLanes ? count - p0 : kLanes;
    __m512 acc[kLanes];
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
      acc[i] = _mm512_setzero_ps();
      if (i >= n) continue;
      const uint8_t* row = job.k + walk.Next();
      for (int v = 0; v < kVec; ++v) {
        const __m512 k = LoadKv<T>(row, kLanes * v, v + 1 == kVec ? tail : 0xffff);
        acc[i] = _mm512_fmadd_ps(q[v], k, acc[i]);
      }
    }
    const __m512 scores = _mm512_mul_ps(TransposedHalvingSum(acc), scale);
    const __mmask16 live = LaneMask(n);
    _mm512_mask_storeu_ps(job.scores + p0, live, scores);
    max = _mm512_mask_max_ps(max, live, max, scores);
  }
  return _mm512_reduce_max_ps(max);
}

// job.scores[p] = KvExp(score - max); returns the 16-lane sum reduced by HSum's tree.
float ExpScores(const AttendJob& job, float max_score) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const __m512 max = _mm512_set1_ps(max_score);
  __m512 sums = _mm512_setzero_ps();
  for (int p0 = 0; p0 < count; p0 += kLanes) {
    const __mmask16 live = LaneMask(count - p0);
    const __m512 e = KvExp(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, job.scores + p0), max));
    _mm512_mask_storeu_ps(job.scores + p0, live, e);
    sums = _mm512_mask_add_ps(sums, live, sums, e);
  }
  return HSum(sums);
}

template <KvType T, int kVec>
void AccumulateValues(const AttendJob& job, float inv_sum, __mmask16 tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  __m512 out[kVec];
  for (int v = 0; v < kVec; ++v) out[v] = _mm512_setzero_ps();
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p = 0; p < count; ++p) {
    const __m512 weight = _mm512_set1_ps(job.scores[p] * inv_sum);
    const uint8_t* row = job.v + walk.Next();
    for (int v = 0; v < kVec; ++v) {
      out[v] = _mm512_fmadd_ps(weight, LoadKv<T>(row, kLanes * v, v + 1 == kVec ? tail : 0xffff),
                               out[v]);
    }
  }
  for (int v = 0; v < kVec; ++v) {
    _mm512_mask_storeu_ps(job.out + kLanes * v, v + 1 == kVec ? tail : 0xffff, out[v]);
  }
}

template <KvType T, int kVec>
void AttendTyped(const AttendJob& job) {
  const int rest = job.head_dim - kLanes * (kVec - 1);
  const __mmask16 tail = LaneMask(rest);
  float max_score = ScoreKeys<T, kVec>(job, tail);
  if (job.soft_cap > 0.0f) {
    max_score = scalar::SoftCapScores(job.scores, job.n_keys - job.first_key, job.soft_cap);
  }
  const float inv_sum = 1.0f / ExpScores(job, max_score);
  AccumulateValues<T, kVec>(job, inv_sum, tail);
}

// Dispatches on head_dim / 16 rounded up (1 .. kMaxAttendHeadDim / 16) at compile time.
template <KvType T, int kVec = 1>
void AttendWidth(const AttendJob& job, int n_vec) {
  if constexpr (kVec <= kMaxAttendHeadDim / kLanes) {
    if (n_vec == kVec) return AttendTyped<T, kVec>(job);
    return AttendWidth<T, kVec + 1>(job, n_vec);
  }
}

}  // namespace

void AttendHead(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  const int n_vec = (job.head_dim + kLanes - 1) / kLanes;
  switch (job.type) {
    case KvType::kF32:
      return AttendWidth<KvType::kF32>(job, n_vec);
    case KvType::kF16:
      return AttendWidth<KvType::kF16>(job, n_vec);
    case KvType::kBF16:
      return AttendWidth<KvType::kBF16>(job, n_vec);
  }
}

}  // namespace kvserve::avx512
