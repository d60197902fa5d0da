// The attention one query head should get, computed in double from the same stored keys and
// values as the kernels read: softmax over keys first .. n_keys - 1 of q · k / sqrt(head_dim),
// soft-capped (tanh(s / cap) * cap) when cap > 0, with a learned sink's logit in the denominator
// (-infinity: none), then the values weighted. `bias` (nullptr: none) adds bias[j - first] to key
// j's scaled score before the soft-cap (T5's relative position bias). The float kernels' error is
// bounded by the scores' roundings (about head_dim of them, ~1e-4 relative on the weights) times
// the weighted magnitude of the values. `Pool` is a test's KV pool: head_dim, n_keys, k, v and
// Load(pool, j, head, d).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvserve::testing {

template <typename Pool>
void ExpectNearDoubleAttention(const Pool& pool, const std::vector<float>& q, int head, int first,
                               float soft_cap, float sink, const std::vector<float>& got,
                               const float* bias = nullptr) {
  std::vector<double> p(pool.n_keys - first);
  double max_score = sink;
  for (int j = first; j < pool.n_keys; ++j) {
    double s = 0.0;
    for (int d = 0; d < pool.head_dim; ++d) s += double{q[d]} * pool.Load(pool.k, j, head, d);
    s /= std::sqrt(static_cast<double>(pool.head_dim));
    if (bias != nullptr) s += bias[j - first];
    if (soft_cap > 0.0f) s = std::tanh(s / soft_cap) * soft_cap;
    p[j - first] = s;
    max_score = std::max(max_score, s);
  }
  double sum = std::exp(double{sink} - max_score);
  for (double& x : p) sum += (x = std::exp(x - max_score));
  for (int d = 0; d < pool.head_dim; ++d) {
    double want = 0.0;
    double magnitude = 0.0;
    for (int j = first; j < pool.n_keys; ++j) {
      const double value = pool.Load(pool.v, j, head, d);
      want += p[j - first] / sum * value;
      magnitude += p[j - first] / sum * std::fabs(value);
    }
    EXPECT_NEAR(got[d], want, 1e-4 * magnitude + 1e-6) << "d=" << d;
  }
}

}  // namespace kvserve::testing
