// The sampler: greedy ties, the fast exp against std::exp, the lazily sorted candidates against a
// plain full sort (the same token for the same seed, on a 262,144-token vocabulary like Gemma 3's),
// and the drawn frequencies against the softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "engine/fast_exp.h"
#include "engine/sampler.h"

namespace kvserve {
namespace {

int UlpDistance(float a, float b) {
  return std::abs(std::bit_cast<int32_t>(a) - std::bit_cast<int32_t>(b));
}

TEST(FastExp, WithinTwoUlpOfStdExpDownToMinus87) {
  int worst = 0;
  for (float x = 0.0f; x >= -87.0f; x -= 0.000731f) {
    worst = std::max(worst, UlpDistance(ExpNonPositive(x), std::exp(x)));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositive(-88.0f), 0.0f);
  EXPECT_EQ(ExpNonPositive(-1e30f), 0.0f);
}

// The sampler's definition written plainly: every candidate sorted (larger logit, then lower id),
// top-k, min-p, top-p, then a draw over the kept probabilities in that order. The normaliser
// without top-k adds every token in id order, in 8 interleaved partial sums (sampler.cc ExpSum).
int32_t ReferenceSample(const std::vector<float>& w, const SamplingParams& params,
                        std::mt19937_64& rng) {
  std::vector<int32_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
  const size_t keep = params.top_k > 0 ? std::min<size_t>(params.top_k, w.size()) : w.size();
  const float max_logit = w[order[0]];
  std::vector<float> p(w.size());
  for (size_t id = 0; id < w.size(); ++id) {
    p[id] = ExpNonPositive((w[id] - max_logit) / params.temperature);
  }
  double sum = 0.0;
  if (keep < w.size()) {
    for (size_t i = 0; i < keep; ++i) sum += p[order[i]];
  } else {
    std::vector<double> lane(8, 0.0);
    const size_t whole = w.size() / 8 * 8;
    for (size_t id = 0; id < whole; ++id) lane[id % 8] += p[id];
    for (size_t id = whole; id < w.size(); ++id) lane[0] += p[id];
    for (double v : lane) sum += v;
  }
  size_t cut = keep;
  for (size_t i = 1; params.min_p > 0.0f && i < cut; ++i) {
    if (p[order[i]] < params.min_p) cut = i;
  }
  if (params.top_p < 1.0f) {
    double running = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      running += p[order[i]] / sum;
      if (running >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  if (cut < w.size()) {
    for (size_t i = 0; i < cut; ++i) kept += p[order[i]];
  } else {
    kept = sum;
  }
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * kept;
  double running = 0.0;
  for (size_t i = 0; i < cut; ++i) {
    running += p[order[i]];
    if (u < running) return order[i];
  }
  return order[cut - 1];
}

// Logits like a trained model's over a large vocabulary: a normal spread and a few likely tokens;
// `ties` repeats values so that the id order between equal logits matters.
std::vector<float> LogitRow(int n_vocab, std::mt19937& rng, float spread, bool ties) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> row(n_vocab);
  for (float& v : row) v = ties ? std::round(normal(rng)) : normal(rng);
  for (int i = 0; i < 6; ++i) row[rng() % n_vocab] = ties ? 9.0f : 9.0f + normal(rng);
  return row;
}

struct Setting {
  const char* name;
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

TEST(Sampler, LazyOrderDrawsWhatAFullSortDraws) {
  const Setting settings[] = {
      {"temperature", 0.8f, 0, 1.0f, 0.0f},  {"hot", 2.5f, 0, 1.0f, 0.0f},
      {"top_k", 0.8f, 40, 1.0f, 0.0f},       {"top_k past the head", 1.0f, 5000, 1.0f, 0.0f},
      {"top_p", 0.8f, 0, 0.9f, 0.0f},        {"min_p", 0.8f, 0, 1.0f, 0.05f},
      {"tiny min_p", 1.5f, 0, 1.0f, 1e-7f},  {"llama.cpp", 0.8f, 40, 0.95f, 0.05f},
      {"top_p deep", 3.0f, 0, 0.999f, 0.0f},
  };
  std::mt19937 rng(7);
  for (const int n_vocab : {50, 262144}) {
    for (const bool ties : {false, true}) {
      std::vector<std::vector<float>> rows;
      for (int r = 0; r < 6; ++r) rows.push_back(LogitRow(n_vocab, rng, ties ? 2.0f : 3.0f, ties));
      for (const Setting& s : settings) {
        SamplingParams params;
        params.temperature = s.temperature;
        params.top_k = s.top_k;
        params.top_p = s.top_p;
        params.min_p = s.min_p;
        params.seed = 11;
        Sampler sampler(params, n_vocab, /*compute_logprob=*/false);
        std::mt19937_64 reference_rng(params.seed);
        const int draws = n_vocab > 1000 ? 8 : 48;  // a full sort of 262,144 is ~30 ms
        for (int draw = 0; draw < draws; ++draw) {
          const std::vector<float>& row = rows[draw % rows.size()];
          ASSERT_EQ(sampler.Sample(row, {}).token, ReferenceSample(row, params, reference_rng))
              << s.name << ", vocabulary " << n_vocab << (ties ? " with ties" : "") << ", draw "
              << draw;
        }
      }
    }
  }
}

// Constrained decoding's mask: never a disallowed token, whatever the filters; greedy takes the
// best allowed one; a mask that allows everything changes no draw.
TEST(Sampler, MaskedDrawsOnlyAllowedTokens) {
  const Setting settings[] = {
      {"greedy", 0.0f, 0, 1.0f, 0.0f},       {"temperature", 0.8f, 0, 1.0f, 0.0f},
      {"hot", 2.5f, 0, 1.0f, 0.0f},          {"top_k", 0.8f, 40, 1.0f, 0.0f},
      {"top_p", 0.8f, 0, 0.9f, 0.0f},        {"min_p", 0.8f, 0, 1.0f, 0.05f},
      {"llama.cpp", 0.8f, 40, 0.95f, 0.05f},
  };
  std::mt19937 rng(3);
  for (const int n_vocab : {50, 262144}) {
    const std::vector<float> row = LogitRow(n_vocab, rng, 3.0f, false);
    // Allowed: a sparse set without the likeliest tokens, and a dense one.
    for (const int stride : {97, 2}) {
      TokenMask mask, all;
      mask.Reset(n_vocab);
      all.Reset(n_vocab);
      for (int32_t id = 0; id < n_vocab; ++id) {
        all.Set(id);
        if (id % stride == 1) mask.Set(id);
      }
      int32_t best = -1;
      for (int32_t id = 0; id < n_vocab; ++id) {
        if (mask.Test(id) && (best < 0 || row[id] > row[best])) best = id;
      }
      for (const Setting& s : settings) {
        SamplingParams params{.temperature = s.temperature,
                              .top_k = s.top_k,
                              .top_p = s.top_p,
                              .min_p = s.min_p,
                              .seed = 5};
        Sampler masked(params, n_vocab, false), plain(params, n_vocab, false),
            everything(params, n_vocab, false);
        for (int draw = 0; draw < 40; ++draw) {
          const int32_t token = masked.Sample(row, {}, {}, &mask).token;
          ASSERT_TRUE(mask.Test(token)) << s.name << " drew " << token;
          if (s.temperature == 0.0f) {
            ASSERT_EQ(token, best);
          }
          ASSERT_EQ(everything.Sample(row, {}, {}, &all).token, plain.Sample(row, {}).token)
              << s.name << ", draw " << draw;
        }
      }
    }
  }
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 6, false);
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 3, 2, 3, -5, 0}, {}).token, 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-1, -1, -1, -1, -1, -1}, {}).token, 0);
  params.logit_bias = {{3, 0.5f}};
  Sampler biased(params, 6, false);
  EXPECT_EQ(biased.Sample(std::vector<float>{1, 3, 2, 3, -5, 0}, {}).token, 3);
}

TEST(Sampler, PenaltiesTouchOnlyTheSeenTokens) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, 4, false);
  const std::vector<int32_t> seen = {1, 1};
  // 3 / 2 = 1.5 < 2: token 1 loses to token 2; the logits passed in are not modified.
  const std::vector<float> logits = {0, 3, 2, -1};
  EXPECT_EQ(sampler.Sample(logits, seen).token, 2);
  EXPECT_EQ(logits[1], 3.0f);
  EXPECT_EQ(sampler.Sample(logits, {}).token, 1);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
  SamplingParams params;
  params.temperature = 0.7f;
  params.seed = 3;
  Sampler sampler(params, static_cast<int>(logits.size()), false);
  constexpr int kDraws = 40000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.Sample(logits, {}).token];
  double z = 0.0;
  for (float v : logits) z += std::exp((v - 2.0) / 0.7);
  for (size_t t = 0; t < logits.size(); ++t) {
    const double p = std::exp((logits[t] - 2.0) / 0.7) / z;
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(counts[t] / static_cast<double>(kDraws), p, 5 * sigma + 1e-4) << "token " << t;
  }
}

TEST(Sampler, LogprobOnlyWhenAsked) {
  SamplingParams params;
  params.temperature = 0.0f;
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4 and 3/4
  Sampler with(params, 2, true);
  EXPECT_NEAR(with.Sample(logits, {}).logprob, std::log(0.75f), 1e-6);
  Sampler without(params, 2, false);
  EXPECT_EQ(without.Sample(logits, {}).logprob, 0.0f);
}

}  // namespace
}  // namespace kvserve
