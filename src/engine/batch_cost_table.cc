#include "engine/batch_cost_table.h"

#include <algorithm>

namespace kvserve {

void BatchCostTable::Observe(int n_tokens, double ms) {
  if (n_tokens < 1 || n_tokens > kMaxTokens || !(ms >= 0)) return;
  double& estimate = estimate_ms_[n_tokens];
  int& samples = samples_[n_tokens];
  if (samples == 0) {
    estimate = ms;
  } else if (samples == 1) {
    estimate = std::min(estimate, ms);  // the first of a size may have grown buffers
  } else {
    estimate += (ms < estimate ? kDown : kUp) * (ms - estimate);
  }
  samples = std::min(samples + 1, kMinSamples);
}

bool BatchCostTable::seen(int n_tokens) const {
  return n_tokens >= 1 && n_tokens <= kMaxTokens && samples_[n_tokens] >= kMinSamples;
}

std::optional<double> BatchCostTable::Predict(int n_tokens) const {
  const int n = std::clamp(n_tokens, 1, kMaxTokens);
  if (seen(n)) return estimate_ms_[n];
  int below = n - 1, above = n + 1;
  while (below >= 1 && !seen(below)) --below;
  while (above <= kMaxTokens && !seen(above)) ++above;
  const bool has_below = below >= 1, has_above = above <= kMaxTokens;
  if (!has_below && !has_above) return std::nullopt;
  if (!has_below) return estimate_ms_[above];
  if (!has_above) return estimate_ms_[below];
  const double t = static_cast<double>(n - below) / (above - below);
  return estimate_ms_[below] + t * (estimate_ms_[above] - estimate_ms_[below]);
}

}  // namespace kvserve
