// AVX-512 attend_head: the arithmetic of attend_head.h, 16 keys at a time. Each key's 16-lane
// score accumulator is reduced by a transposed halving tree that performs, for every key, the same
// additions as HSum (lanes l + 8, l + 4, l + 2, l + 1), so the 16 scores come out in one vector.
// The exp runs 16 lanes at a time; the value pass is an FMA chain per output vector.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why). The
// reductions and the exp pass are shared with the quantized-KV kernel (attend_reduce_avx512.h).
#include "kernels/cpu/immintrin_avx512.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <span>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attend_reduce_avx512.h"

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

// The kVec vectors of a head_dim row of floats (a query, an output), the last masked to head_dim.
template <int kVec>
inline void LoadRow(const float* row, __mmask16 tail, __m512* out) {
  for (int v = 0; v < kVec; ++v) {
    out[v] = _mm512_maskz_loadu_ps(v + 1 == kVec ? tail : 0xffff, row + kLanes * v);
  }
}

// The scaled scores of n <= 16 keys, whose rows are at base + slots[i], in lanes 0 .. n - 1:
// each a 16-lane FMA chain over the row, reduced by the transposed halving tree.
template <KvType T, int kVec>
inline __m512 ScoreBlock(const __m512* q, const uint8_t* base, const size_t* slots, int n,
                         __mmask16 tail, __m512 scale) {
  __m512 acc[kLanes];
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    acc[i] = _mm512_setzero_ps();
    if (i >= n) continue;
    const uint8_t* row = base + slots[i];
    for (int v = 0; v < kVec; ++v) {
      acc[i] =
          _mm512_fmadd_ps(q[v], LoadKv<T>(row, kLanes * v, v + 1 == kVec ? tail : 0xffff), acc[i]);
    }
  }
  return _mm512_mul_ps(TransposedHalvingSum(acc), scale);
}

// out += (scores[i] * inv_sum) * V row i for i < n, in increasing i (the rows at base + slots[i]).
template <KvType T, int kVec>
inline void AccumulateBlock(__m512* out, const uint8_t* base, const size_t* slots,
                            const float* scores, float inv_sum, int n, __mmask16 tail) {
  for (int i = 0; i < n; ++i) {
    const __m512 weight = _mm512_set1_ps(scores[i] * inv_sum);
    const uint8_t* row = base + slots[i];
    for (int v = 0; v < kVec; ++v) {
      out[v] = _mm512_fmadd_ps(weight, LoadKv<T>(row, kLanes * v, v + 1 == kVec ? tail : 0xffff),
                               out[v]);
    }
  }
}

// The slots of the next n keys of a walk.
inline void NextSlots(KvSlotWalk& walk, int n, size_t* slots) {
  for (int i = 0; i < n; ++i) slots[i] = walk.Next();
}

// Scores of all keys into job.scores (16 at a time); returns their maximum. kVec = head_dim / 16
// rounded up; the last vector of q and of every K row is masked to head_dim.
template <KvType T, int kVec>
float ScoreKeys(const AttendJob& job, __mmask16 tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  __m512 q[kVec];
  LoadRow<kVec>(job.q, tail, q);
  const __m512 scale = _mm512_set1_ps(job.scale);
  __m512 max = _mm512_set1_ps(-INFINITY);
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p0 = 0; p0 < count; p0 += kLanes) {
    const int n = count - p0 < kLanes ? count - p0 : kLanes;
    size_t slots[kLanes];
    NextSlots(walk, n, slots);
    const __m512 scores = ScoreBlock<T, kVec>(q, job.k, slots, n, tail, scale);
    const __mmask16 live = LaneMask(n);
    _mm512_mask_storeu_ps(job.scores + p0, live, scores);
    max = _mm512_mask_max_ps(max, live, max, scores);
  }
  return _mm512_reduce_max_ps(max);
}

template <KvType T, int kVec>
void AccumulateValues(const AttendJob& job, float inv_sum, __mmask16 tail) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  __m512 out[kVec];
  for (int v = 0; v < kVec; ++v) out[v] = _mm512_setzero_ps();
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p0 = 0; p0 < count; p0 += kLanes) {
    const int n = count - p0 < kLanes ? count - p0 : kLanes;
    size_t slots[kLanes];
    NextSlots(walk, n, slots);
    AccumulateBlock<T, kVec>(out, job.v, slots, job.scores + p0, inv_sum, n, tail);
  }
  for (int v = 0; v < kVec; ++v) {
    _mm512_mask_storeu_ps(job.out + kLanes * v, v + 1 == kVec ? tail : 0xffff, out[v]);
  }
}

template <KvType T, int kVec>
void AttendTyped(const AttendJob& job) {
  const int rest = job.head_dim - kLanes * (kVec - 1);
  const __mmask16 tail = LaneMask(rest);
  const float inv_sum = SoftmaxInverseSum(job, ScoreKeys<T, kVec>(job, tail));
  AccumulateValues<T, kVec>(job, inv_sum, tail);
}

// Attend_group's jobs read the byte range [lo, lo + span) of each slot (their KV heads' rows side
// by side); Prefetch asks for that range of the slots of keys [from, from + 16) (clipped to count):
// the lines a slot holds for other KV heads are read from memory with them anyway, and a pass that
// read one KV head's part of every slot would cost nearly a whole pool's pass per KV head.
struct SlotSpan {
  const uint8_t* lo;
  size_t span;
  void Prefetch(KvSlotWalk& ahead, int from, int count) const {
    for (int i = from; i < from + kLanes && i < count; ++i) {
      const char* slot = reinterpret_cast<const char*>(lo + ahead.Next());
      for (size_t b = 0; b < span; b += 64) _mm_prefetch(slot + b, _MM_HINT_T1);
    }
  }
};

SlotSpan SpanOf(std::span<const AttendJob> jobs, bool values, size_t head_bytes) {
  const uint8_t* lo = values ? jobs[0].v : jobs[0].k;
  const uint8_t* hi = lo;
  for (const AttendJob& job : jobs) {
    const uint8_t* row = values ? job.v : job.k;
    lo = std::min(lo, row);
    hi = std::max(hi, row);
  }
  return {lo, static_cast<size_t>(hi - lo) + head_bytes};
}

// Walks the jobs' keys 16 at a time, calling fn(p0, n, slots) for keys [p0, p0 + n) with their
// slots' offsets, and prefetches the next 16 keys' slots of the K (or V) pool, the bytes the jobs'
// KV heads span.
template <KvType T, typename Fn>
void ForEachBlock(std::span<const AttendJob> jobs, bool values, Fn&& fn) {
  const AttendJob& first = jobs[0];
  const int count = first.n_keys - first.first_key;
  KvSlotWalk walk(first.block_table, first.block_size, first.slot_bytes, first.first_key);
  KvSlotWalk ahead = walk;
  const SlotSpan span = SpanOf(jobs, values, KvHeadBytes(T, first.head_dim));
  span.Prefetch(ahead, 0, count);
  for (int p0 = 0; p0 < count; p0 += kLanes) {
    const int n = count - p0 < kLanes ? count - p0 : kLanes;
    size_t slots[kLanes];
    NextSlots(walk, n, slots);
    span.Prefetch(ahead, p0 + kLanes, count);
    fn(p0, n, slots);
  }
}

// Several query heads of one token (jobs that share the block table, key range, slot size, type
// and head_dim; each its own q, k, v, scores and out), 16 keys at a time, the next 16 keys' slots
// prefetched whole. Every job's arithmetic is AttendTyped's, in the same order: a score is the same
// chain of FMAs, and an output vector the same chain over the keys in order, parked in job.out
// between blocks.
template <KvType T, int kVec>
void ScoreKeysGroup(std::span<const AttendJob> jobs, __mmask16 tail, float* max_scores) {
  const __m512 scale = _mm512_set1_ps(jobs[0].scale);
  __m512 max[kMaxAttendGroup];
  for (size_t g = 0; g < jobs.size(); ++g) max[g] = _mm512_set1_ps(-INFINITY);
  ForEachBlock<T>(jobs, false, [&](int p0, int n, const size_t* slots) {
    const __mmask16 live = LaneMask(n);
    for (size_t g = 0; g < jobs.size(); ++g) {
      __m512 q[kVec];
      LoadRow<kVec>(jobs[g].q, tail, q);
      const __m512 scores = ScoreBlock<T, kVec>(q, jobs[g].k, slots, n, tail, scale);
      _mm512_mask_storeu_ps(jobs[g].scores + p0, live, scores);
      max[g] = _mm512_mask_max_ps(max[g], live, max[g], scores);
    }
  });
  for (size_t g = 0; g < jobs.size(); ++g) max_scores[g] = _mm512_reduce_max_ps(max[g]);
}

template <KvType T, int kVec>
void AccumulateValuesGroup(std::span<const AttendJob> jobs, const float* inv_sums, __mmask16 tail) {
  for (const AttendJob& job : jobs) {
    for (int v = 0; v < kVec; ++v) {
      _mm512_mask_storeu_ps(job.out + kLanes * v, v + 1 == kVec ? tail : 0xffff,
                            _mm512_setzero_ps());
    }
  }
  ForEachBlock<T>(jobs, true, [&](int p0, int n, const size_t* slots) {
    for (size_t g = 0; g < jobs.size(); ++g) {
      const AttendJob& job = jobs[g];
      __m512 out[kVec];
      LoadRow<kVec>(job.out, tail, out);
      AccumulateBlock<T, kVec>(out, job.v, slots, job.scores + p0, inv_sums[g], n, tail);
      for (int v = 0; v < kVec; ++v) {
        _mm512_mask_storeu_ps(job.out + kLanes * v, v + 1 == kVec ? tail : 0xffff, out[v]);
      }
    }
  });
}

template <KvType T, int kVec>
void AttendGroupTyped(std::span<const AttendJob> jobs) {
  const int rest = jobs[0].head_dim - kLanes * (kVec - 1);
  const __mmask16 tail = LaneMask(rest);
  float max_scores[kMaxAttendGroup];
  float inv_sums[kMaxAttendGroup];
  ScoreKeysGroup<T, kVec>(jobs, tail, max_scores);
  for (size_t g = 0; g < jobs.size(); ++g) {
    inv_sums[g] = SoftmaxInverseSum(jobs[g], max_scores[g]);
  }
  AccumulateValuesGroup<T, kVec>(jobs, inv_sums, tail);
}

template <KvType T, int kVec = 1>
void AttendGroupWidth(std::span<const AttendJob> jobs, int n_vec) {
  if constexpr (kVec <= kMaxAttendHeadDim / kLanes) {
    if (n_vec == kVec) return AttendGroupTyped<T, kVec>(jobs);
    return AttendGroupWidth<T, kVec + 1>(jobs, n_vec);
  }
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
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      return AttendHeadQuant(job);
  }
}

void AttendGroup(std::span<const AttendJob> jobs) {
  assert(!jobs.empty() && jobs.size() <= kMaxAttendGroup);
  const AttendJob& first = jobs[0];
  if (KvTypeIsQuantized(first.type)) {
    for (const AttendJob& job : jobs) AttendHead(job);
    return;
  }
  const int n_vec = (first.head_dim + kLanes - 1) / kLanes;
  switch (first.type) {
    case KvType::kF32:
      return AttendGroupWidth<KvType::kF32>(jobs, n_vec);
    case KvType::kF16:
      return AttendGroupWidth<KvType::kF16>(jobs, n_vec);
    default:
      return AttendGroupWidth<KvType::kBF16>(jobs, n_vec);
  }
}

}  // namespace kvserve::avx512
