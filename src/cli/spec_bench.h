// `kvserve bench --spec ngram|draft|replay`: speculative decoding against plain decoding in the
// same process, on a grounded task (the prompt holds a passage and asks for it again, so the
// answer repeats spans of the prompt) and on free generation, at each --spec-streams count; every
// row checks that both runs gave the same tokens. `replay` drafts the plain output with each
// token right at the --spec-replay probabilities, for the speed-up as a function of the acceptance
// rate; `replay@repeats` drafts, always right, only the output tokens that repeat earlier text:
// the ceiling of drafting from the prompt and the output. Rates are of decoding: tokens after each
// stream's first, from the earliest first token to the last finish. Greedy, or seeded sampling
// (temperature 0.8, top-p 0.95, a seed per request): both are exact under speculation, so both rows
// check the same tokens.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

struct SpecBenchOptions {
  EngineOptions engine;            // spec: the method (and its draft model) to measure
  std::vector<int> streams = {1};  // concurrent requests per row
  std::vector<std::string> tasks = {"grounded", "free"};
  std::vector<std::string> samplings = {"greedy"};  // greedy, seeded
  std::vector<double> accept = {};  // replay: the per-token acceptance probabilities
  bool replay_repeats = false;      // replay: also the repeat ceiling (ReplayProposer's)
  int n_gen = 128;                  // tokens per request
  int repeats = 1;                  // timed runs per side; the best is reported
  std::string format = "md";        // md or json
};

struct SpecBenchRow {
  std::string task;
  int streams = 0;
  std::string method;    // ngram, draft, replay@0.7
  std::string sampling;  // greedy, seeded
  double plain_tokens_per_s = 0;
  double spec_tokens_per_s = 0;
  uint64_t drafted = 0;
  uint64_t accepted = 0;
  // The plain outputs' tokens, and how many of them end a 4-token span that already occurs earlier
  // in their prompt or output (RepeatedPositions): what prompt lookup could draft at best.
  uint64_t generated = 0;
  uint64_t repeated = 0;
  bool same_output = false;
  double speedup() const {
    return plain_tokens_per_s > 0 ? spec_tokens_per_s / plain_tokens_per_s : 0;
  }
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  double repeat_share() const {
    return generated > 0 ? static_cast<double>(repeated) / generated : 0;
  }
};

// Runs every (task, sampling, streams[, accept]) row; fails when a row's outputs differ.
Result<std::vector<SpecBenchRow>> RunSpecBench(const Model& model, const Tokenizer& tokenizer,
                                               const SpecBenchOptions& options);

// The rows as a markdown table or a JSON array.
std::string FormatSpecBench(const std::vector<SpecBenchRow>& rows, const std::string& format);

}  // namespace kvserve
