#include "support/unfreed_run.h"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <utility>

#include "engine/sampler.h"
#include "engine/sequence_runner.h"

namespace kvserve::testing {

StreamOutput Unfreed(const Model& model, const Request& r, int n_ctx) {
  SequenceRunner runner(model, KvType::kF32, n_ctx, 2);
  Sampler sampler(r.sampling, model.config().n_vocab);
  StreamOutput out;
  auto logits = runner.Append(r.prompt);
  while (logits.ok() && static_cast<int>(out.tokens.size()) < r.max_tokens) {
    const SampleResult s = sampler.Sample(*logits, runner.tokens());
    out.tokens.push_back(s.token);
    out.logprobs.push_back(s.logprob);
    if (static_cast<int>(out.tokens.size()) == r.max_tokens) break;
    logits = runner.Append(std::span(&s.token, 1));
  }
  EXPECT_TRUE(logits.ok()) << logits.message();
  return out;
}

Request Sampled(std::vector<int32_t> prompt, int max_tokens, int i) {
  Request r;
  r.id = "r" + std::to_string(i);
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.logprobs = true;
  r.sampling.temperature = 0.8f;
  r.sampling.seed = 100 + i;
  return r;
}

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int n, int n_vocab) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(3 + static_cast<int32_t>(rng() % (n_vocab - 3)));
  return prompt;
}

}  // namespace kvserve::testing
