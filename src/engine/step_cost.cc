#include "engine/step_cost.h"

#include <algorithm>

namespace kvserve {

StepCostModel::StepCostModel(double weight) : weight_(std::clamp(weight, 1e-6, 1.0)) {}

void StepCostModel::Observe(int n_tokens, double ms) {
  if (n_tokens <= 0 || !(ms >= 0)) return;
  const double n = n_tokens;
  const double w = n_observed_ == 0 ? 1.0 : weight_;
  mean_n_ += w * (n - mean_n_);
  mean_t_ += w * (ms - mean_t_);
  mean_nn_ += w * (n * n - mean_nn_);
  mean_nt_ += w * (n * ms - mean_nt_);
  ++n_observed_;
}

StepCost StepCostModel::cost() const {
  StepCost cost;
  if (n_observed_ == 0 || mean_n_ <= 0) return cost;
  const double var_n = mean_nn_ - mean_n_ * mean_n_;
  if (var_n >= kMinSpreadTokens * kMinSpreadTokens) {
    const double slope = (mean_nt_ - mean_n_ * mean_t_) / var_n;
    const double intercept = mean_t_ - slope * mean_n_;
    if (slope > 0 && intercept >= 0) {
      cost.fixed_ms = intercept;
      cost.ms_per_token = slope;
      return cost;
    }
  }
  // Through the origin: the weighted time per token.
  cost.ms_per_token = std::max(mean_t_ / mean_n_, 1e-9);
  return cost;
}

}  // namespace kvserve
