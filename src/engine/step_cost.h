// The engine step's cost model for --max-step-ms: predicted step time = fixed_ms + ms_per_token *
// batched tokens, fitted by exponentially weighted least squares over the steps the engine loop
// timed. Pure arithmetic on the numbers it is given: no clock, no tensors.
#pragma once

namespace kvserve {

// A prediction of one step's wall time in milliseconds. ms_per_token <= 0: unknown.
struct StepCost {
  double fixed_ms = 0;
  double ms_per_token = 0;
  bool known() const { return ms_per_token > 0; }
  double Predict(int n_tokens) const { return fixed_ms + ms_per_token * n_tokens; }
};

class StepCostModel {
 public:
  // weight: the share of each new step in the running moments (0 < weight <= 1).
  explicit StepCostModel(double weight = 0.1);

  // One timed step: n_tokens batched tokens (> 0) took ms milliseconds (>= 0).
  void Observe(int n_tokens, double ms);
  // The fit: a line through the weighted steps where their sizes vary by at least
  // kMinSpreadTokens (standard deviation) and the line has a non-negative intercept; otherwise
  // time per token through the origin (an upper bound for the larger steps when a fixed part
  // exists). Unknown before the first step.
  StepCost cost() const;
  int observed() const { return n_observed_; }

  static constexpr double kMinSpreadTokens = 4;

 private:
  double weight_;
  int n_observed_ = 0;
  // Weighted means of n, t, n*n and n*t (n: tokens, t: milliseconds).
  double mean_n_ = 0;
  double mean_t_ = 0;
  double mean_nn_ = 0;
  double mean_nt_ = 0;
};

}  // namespace kvserve
