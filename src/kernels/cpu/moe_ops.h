// Row operations of a mixture-of-experts feed-forward: routing a token to its top-k experts, and
// summing the experts' weighted outputs back into the token's row. Scalar, one row at a time, in
// an order fixed by the row alone (batch invariant).
#pragma once

#include <cstdint>

namespace kvserve {

// Softmax over the n_expert router logits (in double), the k most probable experts in order of
// decreasing probability (lowest index first on equal probability), and their probabilities
// divided by their sum.  logits, probs (scratch): [n_expert]; ids, weights: [k], 1 <= k <= n_expert
void RouteTopK(const float* logits, int n_expert, int k, double* probs, int32_t* ids,
               float* weights);

// x += Σ_j weights[j] · src row j, the k products summed in j order in float, then added to x.
// src: [k, n]; x: [n]
void AddWeightedSum(float* x, const float* src, const float* weights, int k, int n);

}  // namespace kvserve
