// Turns one row of logits into the next token, per request: greedy, temperature, top-k, top-p,
// min-p, repetition/presence/frequency penalties, logit bias, and log-probabilities.
// Each request owns its Sampler (and so its random stream): batching never shifts anyone's
// random numbers.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "util/status.h"

namespace kvserve {

struct SamplingParams {
  float temperature = 0.8f;         // 0 = greedy
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off; divides positive logits of seen tokens
  float presence_penalty = 0.0f;    // subtracted once from every seen token
  float frequency_penalty = 0.0f;   // subtracted per occurrence
  uint64_t seed = 0xC0FFEE;
  std::map<int32_t, float> logit_bias;  // added to the logits before anything else
  int top_logprobs = 0;                 // how many alternatives to report (0 = none)

  // An error names the parameter and its value.
  Status Validate(int n_vocab) const;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;           // of the chosen token, under the unmodified distribution
  std::vector<TokenLogprob> top;  // top_logprobs alternatives, most likely first
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int n_vocab);

  // Samples from logits [n_vocab]; `history` is the tokens seen so far (prompt and output), used
  // by the penalties, and `earlier` more of them that the sequence no longer holds (dropped by a
  // context shift; the penalties count tokens, so their order does not matter). Does not modify
  // `logits`.
  SampleResult Sample(std::span<const float> logits, std::span<const int32_t> history,
                      std::span<const int32_t> earlier = {});

 private:
  SamplingParams params_;
  int n_vocab_;
  std::mt19937_64 rng_;
  // Reused working memory (no allocation per token after the first).
  std::vector<float> work_;
  std::vector<int32_t> candidates_;
  std::vector<int32_t> counts_;
  std::vector<float> probs_;
  std::vector<float> logprobs_;
};

}  // namespace kvserve
