#include "model/t5_position_bias.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace kvserve {

int RelativePositionBucket(int key_pos, int query_pos, int n_buckets, bool bidirectional) {
  constexpr int64_t kMaxDistance = 128;  // T5's, fixed in llama.cpp too
  int64_t buckets = n_buckets;
  if (bidirectional) buckets /= 2;
  const int64_t max_exact = buckets / 2;
  int32_t distance = key_pos - query_pos;
  int32_t bucket = 0;
  if (bidirectional) {
    if (distance > 0) bucket += static_cast<int32_t>(buckets);
    distance = std::abs(distance);
  } else {
    distance = -std::min<int32_t>(distance, 0);
  }
  if (distance < max_exact) return bucket + distance;
  // The rounding sequence of llama.cpp's expression: log in float, the factor in float, the
  // division and sum in double, the floor in float.
  const float log_ratio = std::log(static_cast<float>(1.0 * distance / max_exact));
  const float scaled = log_ratio * static_cast<float>(buckets - max_exact);
  const double large = static_cast<double>(max_exact) +
                       static_cast<double>(scaled) / std::log(1.0 * kMaxDistance / max_exact);
  const int32_t if_large = static_cast<int32_t>(std::floor(static_cast<float>(large)));
  return bucket + std::min<int32_t>(if_large, static_cast<int32_t>(buckets - 1));
}

void PositionBiasTable::Build(const WeightVector& rel_b, int n_heads, int n_buckets,
                              bool bidirectional, int max_back, int max_ahead) {
  assert(rel_b.size() == static_cast<size_t>(n_heads) * n_buckets);
  width_ = max_back + max_ahead + 1;
  zero_ = max_back;
  values_.resize(static_cast<size_t>(n_heads) * width_);
  const float* table = rel_b.data();
  for (int d = -max_back; d <= max_ahead; ++d) {
    const int bucket = RelativePositionBucket(d, 0, n_buckets, bidirectional);
    for (int h = 0; h < n_heads; ++h) {
      values_[static_cast<size_t>(h) * width_ + zero_ + d] =
          table[static_cast<size_t>(bucket) * n_heads + h];
    }
  }
}

void PositionBiasTable::Apply(AttentionParams& params) const {
  params.position_bias = values_.data();
  params.bias_width = width_;
  params.bias_zero = zero_;
}

}  // namespace kvserve
