// The reference attend_head: one element at a time, in exactly the order kernels.h and
// attend_head.h describe, so the SIMD tables can be compared with it bit for bit.
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attend_head.h"
#include "util/half.h"

namespace kvserve::scalar {

namespace {

constexpr int kLanes = 16;

// HSum's halving tree over 16 lanes: lanes l + 8, then l + 4, l + 2, l + 1.
float HalvingSum(float lanes[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] = lanes[l] + lanes[l + width];
  }
  return lanes[0];
}

float LoadElement(KvType type, const uint8_t* row, int d) {
  switch (type) {
    case KvType::kF32:
      return reinterpret_cast<const float*>(row)[d];
    case KvType::kF16:
      return Fp16ToFloat(reinterpret_cast<const uint16_t*>(row)[d]);
    case KvType::kBF16:
      return Bf16ToFloat(reinterpret_cast<const uint16_t*>(row)[d]);
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      break;  // AttendHeadQuant
  }
  return 0.0f;
}

float Score(const AttendJob& job, const uint8_t* k_row) {
  float acc[kLanes] = {};
  const int padded = (job.head_dim + kLanes - 1) / kLanes * kLanes;
  for (int d = 0; d < padded; ++d) {
    const bool inside = d < job.head_dim;
    const float q = inside ? job.q[d] : 0.0f;
    const float k = inside ? LoadElement(job.type, k_row, d) : 0.0f;
    acc[d % kLanes] = std::fma(q, k, acc[d % kLanes]);
  }
  return HalvingSum(acc) * job.scale;
}

}  // namespace

float KvExp(float x) {
  x = std::fmin(x, kExpMax);
  if (!(x >= kExpMin)) return 0.0f;
  const float n = std::nearbyint(x * kExpLog2e);
  float r = std::fma(n, -kExpLn2Hi, x);
  r = std::fma(n, -kExpLn2Lo, r);
  float p = kExpC7;
  for (const float c : {kExpC6, kExpC5, kExpC4, kExpC3, kExpC2, 1.0f, 1.0f}) p = std::fma(p, r, c);
  const float two_n = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int>(n) + 127) << 23);
  return p * two_n;
}

float SoftCapScores(float* scores, int n, float cap) {
  const float inv_cap = 1.0f / cap;
  float max_score = -INFINITY;
  for (int j = 0; j < n; ++j) {
    scores[j] = std::tanh(scores[j] * inv_cap) * cap;
    max_score = std::fmax(max_score, scores[j]);
  }
  return max_score;
}

float AdjustScores(const AttendJob& job, float max_score) {
  const int n = job.n_keys - job.first_key;
  if (job.bias != nullptr) {
    max_score = -INFINITY;
    for (int j = 0; j < n; ++j) {
      job.scores[j] = job.scores[j] + job.bias[j];
      max_score = std::fmax(max_score, job.scores[j]);
    }
  }
  if (job.soft_cap > 0.0f) max_score = SoftCapScores(job.scores, n, job.soft_cap);
  return max_score;
}

// Key j of the job is position first_key + j.
void AttendHead(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  if (KvTypeIsQuantized(job.type)) return AttendHeadQuant(job);
  const int n = job.n_keys - job.first_key;
  auto slot_offset = [&](int j) {
    return static_cast<size_t>(KvSlot(job.block_table, job.block_size, job.first_key + j)) *
           job.slot_bytes;
  };
  float max_score = -INFINITY;
  for (int j = 0; j < n; ++j) {
    job.scores[j] = Score(job, job.k + slot_offset(j));
    max_score = std::fmax(max_score, job.scores[j]);
  }
  max_score = AdjustScores(job, max_score);
  max_score = std::fmax(max_score, job.sink);
  float sums[kLanes] = {};
  for (int j = 0; j < n; ++j) {
    job.scores[j] = KvExp(job.scores[j] - max_score);
    sums[j % kLanes] = sums[j % kLanes] + job.scores[j];
  }
  const float inv_sum = 1.0f / (HalvingSum(sums) + KvExp(job.sink - max_score));
  for (int d = 0; d < job.head_dim; ++d) job.out[d] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float weight = job.scores[j] * inv_sum;
    const uint8_t* v_row = job.v + slot_offset(j);
    for (int d = 0; d < job.head_dim; ++d) {
      job.out[d] = std::fma(weight, LoadElement(job.type, v_row, d), job.out[d]);
    }
  }
}

void AttendGroup(std::span<const AttendJob> jobs) {
  for (const AttendJob& job : jobs) AttendHead(job);
}

}  // namespace kvserve::scalar
