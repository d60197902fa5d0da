// AVX-512 attend_head for the quantized KV types (q8_0, q4_0): attend_head_avx512.cc's arithmetic
// with every 16 elements of a K or V head row dequantized in registers (codes widened to int32,
// converted, times the group's f16 scale: exact, so the same values as DecodeKvHead). The
// reductions are attend_reduce_avx512.h's.
//
// Intrinsics only, everything in an anonymous namespace (see kernels_avx512.cc on why).
#include "kernels/cpu/immintrin_avx512.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/attend_reduce_avx512.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = 16;
constexpr int kVecsPerGroup = kKvQuantGroup / kLanes;  // vectors sharing one scale

// Where a head row's codes end and its scales begin (kv_format.h).
template <KvType T>
constexpr size_t CodeBytes(int head_dim) {
  return T == KvType::kQ4_0 ? (static_cast<size_t>(head_dim) + 1) / 2
                            : static_cast<size_t>(head_dim);
}

inline __m512 Scale(const uint8_t* scales, int group) {
  uint16_t h;
  std::memcpy(&h, scales + 2 * static_cast<size_t>(group), 2);
  return _mm512_set1_ps(_cvtsh_ss(h));
}

// Elements 16 v .. 16 v + 15 of a head row, dequantized; only the first n (1 <= n <= 16) are
// read, the lanes from n on are zero.
template <KvType T>
inline __m512 LoadQuant(const uint8_t* row, int v, int n, __m512 scale) {
  const __mmask16 live = LaneMask(n);
  __m512i codes;
  if constexpr (T == KvType::kQ8_0) {
    const int8_t* at = reinterpret_cast<const int8_t*>(row) + kLanes * static_cast<size_t>(v);
    const __m128i bytes = n >= kLanes ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(at))
                                      : _mm_maskz_loadu_epi8(live, at);
    codes = _mm512_cvtepi8_epi32(bytes);
  } else {
    const uint8_t* at = row + kLanes / 2 * static_cast<size_t>(v);
    const __m128i bytes = n >= kLanes ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at))
                                      : _mm_maskz_loadu_epi8(LaneMask((n + 1) / 2), at);
    const __m128i nibble = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
    // Byte i holds elements 2i (low) and 2i + 1 (high): interleaved, they are in order.
    codes = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), _mm512_set1_epi32(8));
  }
  return _mm512_maskz_mul_ps(live, _mm512_cvtepi32_ps(codes), scale);
}

// Scores of all keys into job.scores (16 at a time); returns their maximum. kVec = head_dim / 16
// rounded up; `rest` = elements in the last vector.
template <KvType T, int kVec>
float ScoreKeys(const AttendJob& job, int rest) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const size_t code_bytes = CodeBytes<T>(job.head_dim);
  __m512 q[kVec];
  for (int v = 0; v < kVec; ++v) {
    q[v] = _mm512_maskz_loadu_ps(LaneMask(v + 1 == kVec ? rest : kLanes), job.q + kLanes * v);
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
      __m512 group_scale = _mm512_setzero_ps();
      for (int v = 0; v < kVec; ++v) {
        if (v % kVecsPerGroup == 0) group_scale = Scale(row + code_bytes, v / kVecsPerGroup);
        const __m512 k = LoadQuant<T>(row, v, v + 1 == kVec ? rest : kLanes, group_scale);
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

template <KvType T, int kVec>
void AccumulateValues(const AttendJob& job, float inv_sum, int rest) {
  const int count = job.n_keys - job.first_key;  // keys in the window
  const size_t code_bytes = CodeBytes<T>(job.head_dim);
  __m512 out[kVec];
  for (int v = 0; v < kVec; ++v) out[v] = _mm512_setzero_ps();
  KvSlotWalk walk(job.block_table, job.block_size, job.slot_bytes, job.first_key);
  for (int p = 0; p < count; ++p) {
    const __m512 weight = _mm512_set1_ps(job.scores[p] * inv_sum);
    const uint8_t* row = job.v + walk.Next();
    __m512 group_scale = _mm512_setzero_ps();
    for (int v = 0; v < kVec; ++v) {
      if (v % kVecsPerGroup == 0) group_scale = Scale(row + code_bytes, v / kVecsPerGroup);
      out[v] = _mm512_fmadd_ps(
          weight, LoadQuant<T>(row, v, v + 1 == kVec ? rest : kLanes, group_scale), out[v]);
    }
  }
  for (int v = 0; v < kVec; ++v) {
    _mm512_mask_storeu_ps(job.out + kLanes * v, LaneMask(v + 1 == kVec ? rest : kLanes), out[v]);
  }
}

template <KvType T, int kVec>
void AttendTyped(const AttendJob& job) {
  const int rest = job.head_dim - kLanes * (kVec - 1);  // 1 .. 16
  const float inv_sum = SoftmaxInverseSum(job, ScoreKeys<T, kVec>(job, rest));
  AccumulateValues<T, kVec>(job, inv_sum, rest);
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

void AttendHeadQuant(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  const int n_vec = (job.head_dim + kLanes - 1) / kLanes;
  if (job.type == KvType::kQ8_0) return AttendWidth<KvType::kQ8_0>(job, n_vec);
  assert(job.type == KvType::kQ4_0);
  return AttendWidth<KvType::kQ4_0>(job, n_vec);
}

}  // namespace kvserve::avx512
