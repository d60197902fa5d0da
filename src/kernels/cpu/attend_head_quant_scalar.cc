// The reference attend_head for the quantized KV types (q8_0, q4_0): every K and V head row is
// dequantized exactly (DecodeKvHead, kv_format.h: scale * code, no rounding), then the arithmetic
// is attend_head_scalar.cc's, one element at a time in the order kernels.h describes, so the SIMD
// tables can be compared with it bit for bit.
#include <cassert>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attend_head.h"
#include "kv/kv_format.h"

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

// q · k of one key, k already dequantized.  q, k: [head_dim]
float Score(const AttendJob& job, const float* k) {
  float acc[kLanes] = {};
  const int padded = (job.head_dim + kLanes - 1) / kLanes * kLanes;
  for (int d = 0; d < padded; ++d) {
    const bool inside = d < job.head_dim;
    acc[d % kLanes] = std::fma(inside ? job.q[d] : 0.0f, inside ? k[d] : 0.0f, acc[d % kLanes]);
  }
  return HalvingSum(acc) * job.scale;
}

}  // namespace

// Key j of the job is position first_key + j.
void AttendHeadQuant(const AttendJob& job) {
  assert(job.head_dim > 0 && job.head_dim <= kMaxAttendHeadDim);
  assert(job.first_key >= 0 && job.first_key < job.n_keys);
  assert(KvTypeIsQuantized(job.type));
  const int n = job.n_keys - job.first_key;
  auto slot_offset = [&](int j) {
    return static_cast<size_t>(KvSlot(job.block_table, job.block_size, job.first_key + j)) *
           job.slot_bytes;
  };
  float row[kMaxAttendHeadDim];
  float max_score = -INFINITY;
  for (int j = 0; j < n; ++j) {
    DecodeKvHead(job.type, job.k + slot_offset(j), job.head_dim, row);
    job.scores[j] = Score(job, row);
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
    DecodeKvHead(job.type, job.v + slot_offset(j), job.head_dim, row);
    for (int d = 0; d < job.head_dim; ++d) job.out[d] = std::fma(weight, row[d], job.out[d]);
  }
}

}  // namespace kvserve::scalar
