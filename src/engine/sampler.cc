#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace kvserve {

Status SamplingParams::Validate(int n_vocab) const {
  auto bad = [](const std::string& name, double value, const std::string& rule) {
    return Status::InvalidArgument("invalid " + name + " " + std::to_string(value) + ": " + rule);
  };
  if (!(temperature >= 0.0f) || temperature > 100.0f) {
    return bad("temperature", temperature, "must be in [0, 100]");
  }
  if (top_k < 0) return bad("top_k", top_k, "must be >= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", min_p, "must be in [0, 1]");
  if (!(repetition_penalty > 0.0f) || repetition_penalty > 100.0f) {
    return bad("repetition_penalty", repetition_penalty, "must be in (0, 100]");
  }
  if (!(std::fabs(presence_penalty) <= 2.0f)) {
    return bad("presence_penalty", presence_penalty, "must be in [-2, 2]");
  }
  if (!(std::fabs(frequency_penalty) <= 2.0f)) {
    return bad("frequency_penalty", frequency_penalty, "must be in [-2, 2]");
  }
  if (top_logprobs < 0 || top_logprobs > 20) {
    return bad("top_logprobs", top_logprobs, "must be in [0, 20]");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= n_vocab) {
      return Status::InvalidArgument("invalid logit_bias token id " + std::to_string(token) +
                                     ": vocabulary has " + std::to_string(n_vocab) + " tokens");
    }
    if (!std::isfinite(bias)) return bad("logit_bias value", bias, "must be finite");
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params, int n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {}

namespace {

// log(softmax(x))[i] for every i, computed in double for the normaliser.
void LogSoftmax(std::span<const float> x, std::vector<float>& out) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v - max));
  const float log_sum = static_cast<float>(std::log(sum));
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - max - log_sum;
}

int32_t ArgMax(std::span<const float> x) {
  // The first maximum wins, so ties resolve to the lowest id (as llama.cpp's greedy does).
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

}  // namespace

SampleResult Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history,
                             std::span<const int32_t> earlier) {
  SampleResult result;
  std::vector<float>& w = work_;
  w.assign(logits.begin(), logits.end());
  for (const auto& [token, bias] : params_.logit_bias) w[token] += bias;
  const bool penalize = params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                        params_.frequency_penalty != 0.0f;
  if (penalize && !(history.empty() && earlier.empty())) {
    counts_.assign(n_vocab_, 0);
    for (std::span<const int32_t> part : {earlier, history}) {
      for (int32_t token : part) {
        if (token >= 0 && token < n_vocab_) ++counts_[token];
      }
    }
    for (int32_t token = 0; token < n_vocab_; ++token) {
      if (counts_[token] == 0) continue;
      float& v = w[token];
      v = v > 0 ? v / params_.repetition_penalty : v * params_.repetition_penalty;
      v -= params_.presence_penalty + params_.frequency_penalty * counts_[token];
    }
  }

  if (params_.temperature == 0.0f) {
    result.token = ArgMax(w);
  } else {
    // Candidates sorted by logit, then truncated by top-k, min-p and top-p, then sampled.
    candidates_.resize(n_vocab_);
    std::iota(candidates_.begin(), candidates_.end(), 0);
    auto by_logit = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    size_t keep = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
      keep = params_.top_k;
      std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(),
                        by_logit);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    candidates_.resize(keep);
    const float max_logit = w[candidates_[0]];
    std::vector<float>& probs = probs_;
    probs.resize(keep);
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      probs[i] = std::exp((w[candidates_[i]] - max_logit) / params_.temperature);
      sum += probs[i];
    }
    size_t cut = keep;
    if (params_.min_p > 0.0f) {
      // probs[0] is the most likely, exp(0) = 1 before normalisation.
      for (size_t i = 1; i < cut; ++i) {
        if (probs[i] < params_.min_p) {
          cut = i;
          break;
        }
      }
    }
    if (params_.top_p < 1.0f) {
      double running = 0.0;
      for (size_t i = 0; i < cut; ++i) {
        running += probs[i] / sum;
        if (running >= params_.top_p) {
          cut = i + 1;
          break;
        }
      }
    }
    double kept_sum = 0.0;
    for (size_t i = 0; i < cut; ++i) kept_sum += probs[i];
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * kept_sum;
    double running = 0.0;
    result.token = candidates_[cut - 1];
    for (size_t i = 0; i < cut; ++i) {
      running += probs[i];
      if (u < running) {
        result.token = candidates_[i];
        break;
      }
    }
  }

  // Log-probabilities are reported under the model's own distribution (raw logits).
  std::vector<float>& logprobs = logprobs_;
  LogSoftmax(logits, logprobs);
  result.logprob = logprobs[result.token];
  if (params_.top_logprobs > 0) {
    std::vector<int32_t>& order = candidates_;
    order.resize(n_vocab_);
    std::iota(order.begin(), order.end(), 0);
    const int n = std::min(params_.top_logprobs, n_vocab_);
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
      return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
    });
    for (int i = 0; i < n; ++i) result.top.push_back({order[i], logprobs[order[i]]});
  }
  return result;
}

}  // namespace kvserve
