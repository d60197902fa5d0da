// The engine tests' reference for one request: the request alone on a SequenceRunner (f32 KV,
// every block kept, nothing freed), sampled as the engine samples, and the sampled requests and
// random prompts those tests feed both.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/request.h"
#include "model/model.h"
#include "support/stream_output.h"

namespace kvserve::testing {

// The request's tokens and logprobs: its own Sampler over prompt + generated.
StreamOutput Unfreed(const Model& model, const Request& r, int n_ctx);

// Request "r<i>": `prompt`, max_tokens, EOS ignored, logprobs, temperature 0.8, seed 100 + i.
Request Sampled(std::vector<int32_t> prompt, int max_tokens, int i);

// n token ids in [3, n_vocab).
std::vector<int32_t> RandomPrompt(std::mt19937& rng, int n, int n_vocab);

}  // namespace kvserve::testing
