// The single-sequence generation loop used by `kvserve run` and `kvserve chat`: reuse whatever
// prefix of the prompt the runner's cache already holds, prefill the rest in one pass, then sample
// and feed one token at a time until a stop condition.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sequence_runner.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

struct GenerationOptions {
  int max_tokens = 64;
  bool use_cache = true;    // false: recompute the whole sequence every step (--no-cache)
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  SamplingParams sampling;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (the stop token excluded)
  std::string finish_reason;    // "stop" (end-of-generation token, or on_token said so) or "length"
  int n_prompt = 0;             // prompt tokens
  int n_reused = 0;             // prompt tokens found in the cache, not recomputed
  double prompt_ms = 0;         // prefill time
  double decode_ms = 0;         // time from the first sampled token to the end
};

// on_token is called with each generated token as soon as it is sampled; returning false ends
// generation there (finish reason "stop"), e.g. when the caller saw a stop string.
Result<GenerationResult> Generate(SequenceRunner& runner, const Tokenizer& tokenizer,
                                  std::span<const int32_t> prompt, const GenerationOptions& options,
                                  const std::function<bool(int32_t)>& on_token);

}  // namespace kvserve
