// Runs the model directly (no engine) for tests that compare logits between model files.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvserve::testing {

// Logits of every position of `tokens` in one batched forward pass with an f32 KV cache:
// [n_tokens, n_vocab].
std::vector<float> AllPositionLogits(const Model& model, const std::vector<int32_t>& tokens);
// The same logits from one forward pass per token (the decode path: one activation row).
std::vector<float> OneByOneLogits(const Model& model, const std::vector<int32_t>& tokens);

// The index of each row's largest logit.  logits: [n_rows, n_vocab]
std::vector<int> ArgmaxPerRow(const std::vector<float>& logits, int n_vocab);

// The plain decode loop that the engine must agree with, written apart from it: the prompt in one
// pass on a SequenceRunner, then one token at a time, each drawn by a Sampler with `sampling`,
// until max_tokens, a full context (n_ctx), or an end-of-generation token (unless ignore_eos).
// Returns the generated ids, the end-of-generation token excluded.
std::vector<int32_t> ReferenceGenerate(const Model& model, const Tokenizer& tokenizer,
                                       const std::vector<int32_t>& prompt, int max_tokens,
                                       const SamplingParams& sampling, bool ignore_eos, int n_ctx);

}  // namespace kvserve::testing
