// Decode steps' measured wall time by their batched token count (decoding sequences plus their
// drafted tokens): what verifying k more tokens costs on this machine, model and thread count,
// for speculative decoding's cost gate (DraftPlanner). Where the step is bandwidth bound extra
// rows are nearly free; where it is compute bound (small CPUs, many streams) they cost as much as
// a step's worth of tokens, and that differs from one machine to the next.
//
// A running estimate per count 1..kMaxTokens, trusted from its kMinSamples-th step on (the first
// step of a new size may pay for growing buffers). Noise on a shared machine only ever slows a
// step, so the estimate follows a faster step quickly and a slower one slowly (weights kDown,
// kUp): it tracks the step's cost, not the neighbours' interference. Counts not yet trusted are
// interpolated linearly between the nearest trusted ones; below the smallest they cost what it
// costs, above the largest they are predicted at its cost (optimistic, so that the gate tries
// them and learns what they cost). Pure arithmetic on the numbers it is given: no clock.
#pragma once

#include <optional>
#include <vector>

namespace kvserve {

class BatchCostTable {
 public:
  static constexpr int kMaxTokens = 256;
  static constexpr int kMinSamples = 2;
  static constexpr double kDown = 0.5;  // share of a faster step in the estimate
  static constexpr double kUp = 0.1;    // share of a slower one

  // One timed decode step of n_tokens batched tokens took ms milliseconds; counts outside
  // 1..kMaxTokens and negative times are ignored.
  void Observe(int n_tokens, double ms);
  // The predicted milliseconds of a decode step of n_tokens (>= 1); none before the first step.
  std::optional<double> Predict(int n_tokens) const;
  // Whether n_tokens's estimate is trusted (kMinSamples steps of it timed).
  bool seen(int n_tokens) const;

 private:
  std::vector<double> estimate_ms_ = std::vector<double>(kMaxTokens + 1, 0.0);  // index = tokens
  std::vector<int> samples_ = std::vector<int>(kMaxTokens + 1, 0);
};

}  // namespace kvserve
