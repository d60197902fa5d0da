#include "engine/sampler.h"

#include "engine/fast_exp.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
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

Sampler::Sampler(const SamplingParams& params, int n_vocab, bool compute_logprob)
    : params_(params), n_vocab_(n_vocab), compute_logprob_(compute_logprob), rng_(params.seed) {}

namespace {

// The loops over the whole vocabulary (the maximum, the exponentials, the head's keys), compiled
// for AVX-512, AVX2 and the x86-64 baseline and chosen when the program loads by what the CPU has
// (GCC's target_clones). The file is built with -ffp-contract=off, so no clone fuses a multiply
// and an add that another rounds twice: every clone gives the same bits. Not under ThreadSanitizer:
// GCC instruments the clones' resolver, which the loader runs before TSan's runtime has started,
// and the program dies in the loader.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KVSERVE_VOCAB_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVSERVE_VOCAB_LOOP
#endif

// A key whose descending order is the candidates' order: the larger logit first and, between
// equal logits, the lower id. The float's bits are made unsigned-monotone (-0 counts as +0).
uint64_t OrderKey(float logit, int32_t id) {
  uint32_t bits = std::bit_cast<uint32_t>(logit + 0.0f);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t{bits} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

int32_t KeyId(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

// The largest of x (not empty), in 8 lanes so that the compiler vectorizes it (maxps).
KVSERVE_VOCAB_LOOP float MaxOf(std::span<const float> x) {
  std::array<float, 8> lane;
  lane.fill(x[0]);
  size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    for (size_t j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  for (; i < x.size(); ++i) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  float best = lane[0];
  for (float v : lane) best = v > best ? v : best;
  return best;
}

int32_t ArgMax(std::span<const float> x) {
  // The first maximum wins, so ties resolve to the lowest id (as llama.cpp's greedy does).
  const float best = MaxOf(x);
  return static_cast<int32_t>(std::find(x.begin(), x.end(), best) - x.begin());
}

// out[i] = exp((logits[i] - max_logit) / temperature) for every i, and returns their sum in double,
// added in 8 interleaved partial sums (a fixed order, so the same logits give the same bits).
KVSERVE_VOCAB_LOOP double ExpSum(std::span<const float> logits, float max_logit, float temperature,
                                 float* out) {
  const float* in = logits.data();
  const size_t n = logits.size();
  for (size_t i = 0; i < n; ++i) out[i] = ExpNonPositive((in[i] - max_logit) / temperature);
  std::array<double, 8> lane{};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) lane[j] += out[i + j];
  }
  for (; i < n; ++i) lane[0] += out[i];
  double sum = 0.0;
  for (double v : lane) sum += v;
  return sum;
}

// out[i] = x[i] - max - log_sum for every i (cloned per ISA like the loops above).
KVSERVE_VOCAB_LOOP void SubtractFrom(std::span<const float> x, float max, float log_sum,
                                     float* out) {
  const float* in = x.data();
  for (size_t i = 0; i < x.size(); ++i) out[i] = in[i] - max - log_sum;
}

// log(softmax(x))[i] for every i. The normaliser is ExpSum's (exponentials within 2 ulp of
// std::exp, added in double in 8 partial sums), so it changes a log-probability by at most about
// 2.4e-7; one call of std::exp in double per logit took 15 ms on Gemma 3's 262,144 logits on a
// Zen 3 core, about a whole decode step.
void LogSoftmax(std::span<const float> x, std::vector<float>& out) {
  const float max = MaxOf(x);
  out.resize(x.size());
  const double sum = ExpSum(x, max, 1.0f, out.data());  // out holds the exponentials meanwhile
  SubtractFrom(x, max, static_cast<float>(std::log(sum)), out.data());
}

// A logit floor above which about the best 0.4% of a large vocabulary lies (1,024 of 262,144),
// estimated from 4,096 evenly spaced logits, and never below `lowest` (20 temperatures under the
// best: probability under 2e-9 of the best's). Only speed depends on it: the candidates under it
// are ordered too, when a walk reaches them.
float HeadFloor(std::span<const float> logits, float lowest) {
  constexpr size_t kSamples = 4096;
  constexpr size_t kRank = 16;  // the 16th largest sample
  if (logits.size() < 4 * kSamples) return lowest;
  std::array<float, kSamples> samples;
  const size_t stride = logits.size() / kSamples;
  for (size_t i = 0; i < kSamples; ++i) samples[i] = logits[i * stride];
  std::nth_element(samples.begin(), samples.begin() + (kRank - 1), samples.end(), std::greater<>());
  return std::max(samples[kRank - 1], lowest);
}

// Appends the keys of the logits at or above `floor`, in id order. About 0.4% of them are (the
// head), so blocks of 16 are first tested at once (a vectorized compare) and most are skipped.
KVSERVE_VOCAB_LOOP void AppendKeysAbove(std::span<const float> logits, float floor,
                                        std::vector<uint64_t>& keys) {
  constexpr size_t kBlock = 16;
  const size_t n = logits.size();
  size_t begin = 0;
  for (; begin + kBlock <= n; begin += kBlock) {
    bool any = false;
    for (size_t j = 0; j < kBlock; ++j) any |= logits[begin + j] >= floor;
    if (!any) continue;
    for (size_t i = begin; i < begin + kBlock; ++i) {
      if (logits[i] >= floor) keys.push_back(OrderKey(logits[i], static_cast<int32_t>(i)));
    }
  }
  for (size_t i = begin; i < n; ++i) {
    if (logits[i] >= floor) keys.push_back(OrderKey(logits[i], static_cast<int32_t>(i)));
  }
}

}  // namespace

void Sampler::CandidateOrder::Reset(std::span<const float> logits, float head_floor) {
  logits_ = logits;
  head_floor_ = head_floor;
  keys_.clear();
  AppendKeysAbove(logits, head_floor, keys_);
  std::sort(keys_.begin(), keys_.end(), std::greater<>());
  size_ = logits.size();
  sorted_ = keys_.size();
  has_tail_ = false;
}

void Sampler::CandidateOrder::AddTail() {
  for (size_t i = 0; i < logits_.size(); ++i) {
    // Not >= head_floor_: exactly the complement of the head (NaN included).
    if (!(logits_[i] >= head_floor_)) {
      keys_.push_back(OrderKey(logits_[i], static_cast<int32_t>(i)));
    }
  }
  has_tail_ = true;
}

void Sampler::CandidateOrder::Truncate(size_t k) {
  if (k >= size_) return;
  if (k > 0) at(k - 1);  // sorts the first k
  size_ = k;
}

int32_t Sampler::CandidateOrder::at(size_t i) {
  if (i >= keys_.size() && !has_tail_) AddTail();
  if (i >= sorted_) {
    // Sort the next stretch: at least 64 keys, and twice the head so far, so that a draw deep in
    // a flat distribution costs O(n log n) in all, as one full sort would.
    const size_t end = std::min(keys_.size(), std::max({i + 1, 2 * sorted_, size_t{64}}));
    const auto first = keys_.begin() + static_cast<std::ptrdiff_t>(sorted_);
    const auto last = keys_.begin() + static_cast<std::ptrdiff_t>(end);
    if (end < keys_.size()) std::nth_element(first, last - 1, keys_.end(), std::greater<>());
    std::sort(first, last, std::greater<>());
    sorted_ = end;
  }
  return KeyId(keys_[i]);
}

std::span<const float> Sampler::Adjusted(std::span<const float> logits,
                                         std::span<const int32_t> history,
                                         std::span<const int32_t> earlier,
                                         const TokenMask* allowed) {
  const bool penalize = (params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                         params_.frequency_penalty != 0.0f) &&
                        !(history.empty() && earlier.empty());
  if (params_.logit_bias.empty() && !penalize && allowed == nullptr) {
    return logits;  // no copy of the vocabulary
  }
  work_.assign(logits.begin(), logits.end());
  for (const auto& [token, bias] : params_.logit_bias) work_[token] += bias;
  if (penalize) Penalize(history, earlier);
  if (allowed != nullptr) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    const std::vector<uint64_t>& words = allowed->words();
    for (size_t word = 0; word < words.size(); ++word) {
      if (words[word] == ~uint64_t{0}) continue;  // all 64 allowed
      const size_t end = std::min<size_t>(64 * word + 64, work_.size());
      for (size_t id = 64 * word; id < end; ++id) {
        if (!((words[word] >> (id & 63)) & 1)) work_[id] = kMasked;
      }
    }
  }
  return work_;
}

void Sampler::Penalize(std::span<const int32_t> history, std::span<const int32_t> earlier) {
  counts_.assign(n_vocab_, 0);
  candidates_.clear();  // the distinct tokens seen, each once
  for (std::span<const int32_t> part : {earlier, history}) {
    for (int32_t token : part) {
      if (token >= 0 && token < n_vocab_ && counts_[token]++ == 0) candidates_.push_back(token);
    }
  }
  for (int32_t token : candidates_) {
    float& v = work_[token];
    v = v > 0 ? v / params_.repetition_penalty : v * params_.repetition_penalty;
    v -= params_.presence_penalty + params_.frequency_penalty * counts_[token];
  }
}

SampleResult Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history,
                             std::span<const int32_t> earlier, const TokenMask* allowed) {
  SampleResult result;
  const std::span<const float> w = Adjusted(logits, history, earlier, allowed);
  const size_t keep = allowed != nullptr ? static_cast<size_t>(allowed->Count()) : w.size();
  result.token = params_.temperature == 0.0f ? ArgMax(w) : SampleWithTemperature(w, keep);
  if (compute_logprob_ || params_.top_logprobs > 0) FillLogprobs(logits, result);
  return result;
}

// Candidates in order (larger logit first), truncated by top-k, min-p and top-p, then one drawn
// with probability proportional to exp((logit - max) / temperature). Without top-k the normaliser
// sums every token in id order; otherwise, and for the kept head, in candidate order.
int32_t Sampler::SampleWithTemperature(std::span<const float> w, size_t n_allowed) {
  const float max_logit = MaxOf(w);
  order_.Reset(w, HeadFloor(w, max_logit - 20.0f * params_.temperature));
  const size_t keep = params_.top_k > 0 ? std::min<size_t>(params_.top_k, w.size()) : w.size();
  order_.Truncate(keep);
  probs_.resize(w.size());
  double sum = 0.0;
  if (keep < w.size()) {
    for (size_t i = 0; i < keep; ++i) {
      const int32_t id = order_.at(i);
      probs_[id] = ExpNonPositive((w[id] - max_logit) / params_.temperature);
      sum += probs_[id];
    }
  } else {
    sum = ExpSum(w, max_logit, params_.temperature, probs_.data());
  }
  // Masked candidates (-inf) come last in the order with probability exactly 0: a cut past the
  // allowed ones keeps the whole mass, and the draw never reaches them.
  size_t cut = CutOff(keep, sum);
  double kept_sum = 0.0;
  if (cut < w.size() && cut < n_allowed) {
    for (size_t i = 0; i < cut; ++i) kept_sum += probs_[order_.at(i)];
  } else {
    kept_sum = sum;
  }
  cut = std::min(cut, std::max<size_t>(n_allowed, 1));
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * kept_sum;
  double running = 0.0;
  for (size_t i = 0; i < cut; ++i) {
    running += probs_[order_.at(i)];
    if (u < running) return order_.at(i);
  }
  return order_.at(cut - 1);  // u at the very end of the mass (rounding): the last kept token
}

size_t Sampler::CutOff(size_t keep, double sum) {
  size_t cut = keep;
  if (params_.min_p > 0.0f) {
    // The first candidate has probability 1 before normalisation, and they only fall from there.
    for (size_t i = 1; i < cut; ++i) {
      if (probs_[order_.at(i)] < params_.min_p) {
        cut = i;
        break;
      }
    }
  }
  if (params_.top_p < 1.0f) {
    double running = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      running += probs_[order_.at(i)] / sum;
      if (running >= params_.top_p) return i + 1;
    }
  }
  return cut;
}

// Log-probabilities are reported under the model's own distribution (raw logits).
void Sampler::FillLogprobs(std::span<const float> logits, SampleResult& result) {
  std::vector<float>& logprobs = logprobs_;
  LogSoftmax(logits, logprobs);
  result.logprob = logprobs[result.token];
  if (params_.top_logprobs <= 0) return;
  std::vector<int32_t>& order = candidates_;
  order.resize(n_vocab_);
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min(params_.top_logprobs, n_vocab_);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
  });
  for (int i = 0; i < n; ++i) result.top.push_back({order[i], logprobs[order[i]]});
}

}  // namespace kvserve
