// Time of one Sampler::Sample call over a vocabulary the size of Gemma 3's (262,144 logits), for
// the sampling settings people use; compare with a decode step (`kvserve bench -n 64 -p 0`) to get
// sampling's share of the step (docs/benchmarks.md, "Sampling on a 262k vocabulary").
//
// Not part of the CMake build; compile ad hoc against the library, e.g.
//   g++ -std=c++20 -O3 -Isrc bench/sampler_bench.cc build/libkvserve_engine.a \
//       build/libkvserve_util.a -o /tmp/sampler_bench
//   /tmp/sampler_bench [n_vocab]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace kvserve {
namespace {

struct Case {
  const char* name;
  SamplingParams params;
  bool logprobs = false;  // the request asks for logprobs (the engine's compute_logprob)
};

std::vector<Case> Cases() {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams plain;  // kvserve run's and the OpenAI API's defaults: temperature only
  plain.temperature = 0.8f;
  SamplingParams llama;  // llama.cpp's defaults
  llama.temperature = 0.8f;
  llama.top_k = 40;
  llama.top_p = 0.95f;
  llama.min_p = 0.05f;
  SamplingParams top_p = plain;
  top_p.top_p = 0.9f;
  SamplingParams min_p = plain;
  min_p.min_p = 0.05f;
  SamplingParams penalties = llama;
  penalties.repetition_penalty = 1.1f;
  penalties.frequency_penalty = 0.5f;
  SamplingParams logprobs = plain;
  logprobs.top_logprobs = 5;
  return {{"greedy", greedy},
          {"temperature 0.8", plain},
          {"top_p 0.9", top_p},
          {"min_p 0.05", min_p},
          {"llama.cpp defaults (k 40, p 0.95, min_p 0.05)", llama},
          {"llama.cpp defaults + penalties, 512-token history", penalties},
          {"temperature 0.8 + logprobs (top 5)", logprobs, true}};
}

}  // namespace
}  // namespace kvserve

int main(int argc, char** argv) {
  using namespace kvserve;
  const int n_vocab = argc > 1 ? std::atoi(argv[1]) : 262144;
  // Logits shaped like a trained model's: most tokens far below a few likely ones.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int kRows = 16;
  std::vector<std::vector<float>> rows(kRows, std::vector<float>(n_vocab));
  for (auto& row : rows) {
    for (float& v : row) v = normal(rng);
    for (int i = 0; i < 8; ++i) row[rng() % n_vocab] += 12.0f;
  }
  std::vector<int32_t> history(512);
  for (int32_t& t : history) t = static_cast<int32_t>(rng() % n_vocab);
  std::printf("n_vocab %d, microseconds per Sample (median of 64 calls)\n", n_vocab);
  for (const Case& c : Cases()) {
    Sampler sampler(c.params, n_vocab, c.logprobs);
    std::vector<double> times;
    for (int i = 0; i < 64; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const SampleResult r = sampler.Sample(rows[i % kRows], history);
      const auto end = std::chrono::steady_clock::now();
      if (r.token < 0) return 1;
      times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::nth_element(times.begin(), times.begin() + 32, times.end());
    std::printf("%-52s %9.1f\n", c.name, times[32]);
  }
}
