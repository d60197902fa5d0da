// AVX2 attend_head: the arithmetic of attend_head.h with every 16-lane accumulator held as two
// 8-lane halves (lanes 0-7 and 8-15), so HSum's first step (lane l + 8) is one add of the halves.
// Scores go 8 keys at a time: a transposed tree then performs, for every key, the rest of HSum's
// additions (lanes l + 4, l + 2, l + 1), so the 8 scores come out in one vector. The exp runs 8
// lanes at a time; the value pass is an FMA chain per 8-wide output vector.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why).
#include <immintrin.h>

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/kv_exp_avx2.h"

namespace kvserve::avx2 {

namespace {

constexpr int kLanes = 8;        // floats in a __m256
constexpr int kAccLanes = 16;    // lanes of the contract's accumulators: two __m256 halves
constexpr int kKeysPerStep = 8;  // scores reduced together by TransposedHalvingSum

// Lanes [0, n) all ones, the rest zero (n may be anything; n >= 8 selects all).
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

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

// Elements of head_dim in the last two 8-lane chunks of a kVec * 16 padded row: lo in chunk
// 2 kVec - 2, hi in chunk 2 kVec - 1 (every earlier chunk is full).
struct Tail {
  int lo;
  int hi;
};

template <int kVec>
inline int ChunkLength(int chunk, Tail tail) {
  if (chunk < 2 * kVec - 2) return kLanes;
  return chunk == 2 * kVec - 2 ? tail.lo : tail.hi;
}

// a[i] (i < 8) holds key i's 16-lane accumulator after HSum's first step (lanes l + 8 added);
// returns v with v[i] = the rest of HSum's tree on a[i]: lanes l + 4, then l + 2, then l + 1.
inline __m256 TransposedHalvingSum(const __m256 a[kKeysPerStep]) {
  __m256 s4[4];  // s4[p]: lanes 0-3 key 2p, lanes 4-7 key 2p + 1 (4 partial sums each)
  for (int p = 0; p < 4; ++p) {
    const __m256 x = _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x20);
    const __m256 y = _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x31);
    s4[p] = _mm256_add_ps(x, y);
  }
  // s2[p], 128-bit half h: lanes 0-1 key 4p + h, lanes 2-3 key 4p + 2 + h (2 partial sums each).
  __m256 s2[2];
  for (int p = 0; p < 2; ++p) {
    const __m256 x = _mm256_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 y = _mm256_shuffle_ps(s4[2 * p], s4[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s2[p] = _mm256_add_ps(x, y);
  }
  // Half h, lane i: key h + 2 i.
  const __m256 x = _mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 y = _mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 s1 = _mm256_add_ps(x, y);
  return _mm256_permutevar8x32_ps(s1, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// HSum's tree on a 16-lane accumulator given as its halves.
inline float HalvingSum(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline float MaxLane(__m256 v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
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

// job.scores[p] = KvExp(score - max); returns their 16-lane sum (lane p mod 16) reduced by HSum's
// tree.
float ExpScores(const AttendJob& job, float max_score) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const __m256 max = _mm256_set1_ps(max_score);
  __m256 sums[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // lanes 0-7, lanes 8-15
  for (int p0 = 0; p0 < count; p0 += kAccLanes) {
    for (int half = 0; half < 2; ++half) {
      float* at = job.scores + p0 + kLanes * half;
      const __m256i live = LaneMask(count - p0 - kLanes * half);
      const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(live),
                                     KvExp(_mm256_sub_ps(_mm256_maskload_ps(at, live), max)));
      _mm256_maskstore_ps(at, live, e);
      sums[half] = _mm256_add_ps(sums[half], e);  // + 0 in the lanes past n_keys: no change
    }
  }
  return HalvingSum(sums[0], sums[1]);
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
  }
}

}  // namespace kvserve::avx2
