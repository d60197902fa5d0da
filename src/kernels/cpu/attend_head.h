// The attend_head kernels of kernels.h (AttendJob), one per ISA, each in its own translation unit:
// attend_head_scalar.cc (the reference), attend_head_avx2.cc and attend_head_avx512.cc; each
// hands the quantized KV types (q8_0, q4_0) to its ISA's AttendHeadQuant
// (attend_head_quant_<isa>.cc), which dequantizes every K and V element exactly (kv_format.h)
// and then does the same arithmetic. Call them through the KernelTable.
//
// KvExp(x), the exp of the softmax, is the same sequence of IEEE operations in every table, so
// all of them give the same bits:
//   x = min(x, 88);  if !(x >= -87) return 0;           (e^-87 is below the smallest normal float)
//   n = nearbyint(x * kExpLog2e);                          (ties to even)
//   r = fma(n, -kExpLn2Hi, x);  r = fma(n, -kExpLn2Lo, r); (Cody-Waite: r = x - n ln 2, |r| <=
//   0.35) p = kExpC7;  p = fma(p, r, c) for c = kExpC6 .. kExpC2, 1, 1;   (Taylor series to r^7)
//   return p * 2^n                                         (2^n built from the exponent bits)
// Its relative error against exp is about 2e-7 (tests/kernels_test.cc measures it).
#pragma once

#include "kernels/cpu/kernels.h"
#include "kv/kv_layer_view.h"

namespace kvserve {

constexpr float kExpLog2e = 1.44269504088896341f;
constexpr float kExpLn2Hi = 0.693359375f;  // 9 significant bits: n * kExpLn2Hi is exact
constexpr float kExpLn2Lo = -2.12194440e-4f;
constexpr float kExpC2 = 1.0f / 2;
constexpr float kExpC3 = 1.0f / 6;
constexpr float kExpC4 = 1.0f / 24;
constexpr float kExpC5 = 1.0f / 120;
constexpr float kExpC6 = 1.0f / 720;
constexpr float kExpC7 = 1.0f / 5040;
constexpr float kExpMin = -87.0f;
constexpr float kExpMax = 88.0f;

namespace scalar {
void AttendHead(const AttendJob& job);
// AttendGroupFn (kernels.h): attend_head on each job
void AttendGroup(std::span<const AttendJob> jobs);
// job.type q8_0 or q4_0.
void AttendHeadQuant(const AttendJob& job);
// The reference KvExp above.
float KvExp(float x);
// scores[j] = tanh(scores[j] * (1 / cap)) * cap for j < n, one at a time; returns their maximum
// (NaN skipped, as std::fmax). Every table's attend_head calls this one function for a soft-cap.
float SoftCapScores(float* scores, int n, float cap);
// What every table does to the scores between scoring and the softmax, one key at a time: adds
// job.bias (scores[j] = scores[j] + bias[j]), then soft-caps; returns the new maximum, or
// `max_score` when the job has neither.
float AdjustScores(const AttendJob& job, float max_score);
}  // namespace scalar

namespace avx2 {
void AttendHead(const AttendJob& job);
// AttendGroupFn (kernels.h): attend_head on each job
void AttendGroup(std::span<const AttendJob> jobs);
// job.type q8_0 or q4_0.
void AttendHeadQuant(const AttendJob& job);
}  // namespace avx2

namespace avx512 {
void AttendHead(const AttendJob& job);
// AttendGroupFn (kernels.h): the float KV types in one pass over the slots, prefetched; the
// quantized ones by AttendHead on each job
void AttendGroup(std::span<const AttendJob> jobs);
// job.type q8_0 or q4_0.
void AttendHeadQuant(const AttendJob& job);
}  // namespace avx512

}  // namespace kvserve
