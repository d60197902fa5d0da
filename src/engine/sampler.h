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

#include "grammar/token_mask.h"
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
  // compute_logprob: fill SampleResult::logprob (a softmax over the whole vocabulary, a few
  // milliseconds on a 262k vocabulary); the engine asks for it only when the request does.
  Sampler(const SamplingParams& params, int n_vocab, bool compute_logprob = true);

  // Samples from logits [n_vocab]; `history` is the tokens seen so far (prompt and output), used
  // by the penalties, and `earlier` more of them that the sequence no longer holds (dropped by a
  // context shift; the penalties count tokens, so their order does not matter). Does not modify
  // `logits`. `allowed` (constrained decoding; not empty): only these tokens may be chosen, as if
  // every other logit were -inf after the bias and the penalties; the reported logprobs stay
  // those of the model's own distribution.
  SampleResult Sample(std::span<const float> logits, std::span<const int32_t> history,
                      std::span<const int32_t> earlier = {}, const TokenMask* allowed = nullptr);

 private:
  // The candidates in the sampler's order (larger logit first, then lower id) as 64-bit keys,
  // ordered lazily: only the head that top-k, top-p, min-p and the draw reach is sorted, not the
  // whole vocabulary (a draw usually ends in the first few hundred of 262,144 candidates).
  class CandidateOrder {
   public:
    // A new order over logits (which must outlive it). The logits at or above head_floor are a
    // prefix of the order: they are collected and sorted first, the rest only when a walk
    // reaches them.
    void Reset(std::span<const float> logits, float head_floor);
    // Keeps only the k first candidates (top-k).
    void Truncate(size_t k);
    size_t size() const { return size_; }
    int32_t at(size_t i);  // the i-th candidate's id; sorts further when i is past the head

   private:
    void AddTail();  // the keys below head_floor_, once a walk goes past the head

    std::span<const float> logits_;
    float head_floor_ = 0.0f;
    std::vector<uint64_t> keys_;
    size_t size_ = 0;    // candidates in the order: the vocabulary, or k after Truncate
    size_t sorted_ = 0;  // keys_[0, sorted_) are the largest keys, in descending order
    bool has_tail_ = false;
  };

  // The logits after logit_bias and the penalties: `logits` itself when neither applies, else
  // work_.
  std::span<const float> Adjusted(std::span<const float> logits, std::span<const int32_t> history,
                                  std::span<const int32_t> earlier, const TokenMask* allowed);
  void Penalize(std::span<const int32_t> history, std::span<const int32_t> earlier);  // on work_
  // n_allowed: candidates that may be drawn at all (under a mask the others are -inf in `w`, so
  // they come last in the order).
  int32_t SampleWithTemperature(std::span<const float> w, size_t n_allowed);
  // The candidate position where min-p, then top-p, end the list (at most `keep`).
  size_t CutOff(size_t keep, double sum);
  void FillLogprobs(std::span<const float> logits, SampleResult& result);

  SamplingParams params_;
  int n_vocab_;
  bool compute_logprob_;
  std::mt19937_64 rng_;
  // Reused working memory (no allocation per token after the first).
  std::vector<float> work_;   // [n_vocab] logits after bias and penalties
  std::vector<float> probs_;  // [n_vocab] exp((logit - max) / temperature), by token id
  CandidateOrder order_;
  std::vector<int32_t> candidates_;
  std::vector<int32_t> counts_;
  std::vector<float> logprobs_;
};

}  // namespace kvserve
