#include "kernels/cpu/moe_ops.h"

#include <cmath>
#include <cstddef>

namespace kvserve {

void RouteTopK(const float* logits, int n_expert, int k, double* probs, int32_t* ids,
               float* weights) {
  double max = logits[0];
  for (int e = 1; e < n_expert; ++e) max = std::fmax(max, static_cast<double>(logits[e]));
  double sum = 0.0;
  for (int e = 0; e < n_expert; ++e) {
    probs[e] = std::exp(static_cast<double>(logits[e]) - max);
    sum += probs[e];
  }
  for (int e = 0; e < n_expert; ++e) probs[e] /= sum;
  // Selection by repeated scans (k and n_expert are small: 8 of 128 in the largest released
  // models); the tie rule is the strict comparison: a later expert must be more probable. A taken
  // expert is marked -1, below every probability.
  double chosen_sum = 0.0;
  for (int j = 0; j < k; ++j) {
    int best = 0;
    for (int e = 1; e < n_expert; ++e) {
      if (probs[e] > probs[best]) best = e;
    }
    ids[j] = best;
    chosen_sum += probs[best];
    probs[best] = -1.0;
  }
  // The chosen probabilities again, by the same expression (the same bits), renormalised.
  for (int j = 0; j < k; ++j) {
    const double p = std::exp(static_cast<double>(logits[ids[j]]) - max) / sum;
    weights[j] = static_cast<float>(p / chosen_sum);
  }
}

void AddWeightedSum(float* x, const float* src, const float* weights, int k, int n) {
  for (int c = 0; c < n; ++c) {
    float acc = weights[0] * src[c];
    for (int j = 1; j < k; ++j) acc += weights[j] * src[static_cast<size_t>(j) * n + c];
    x[c] += acc;
  }
}

}  // namespace kvserve
