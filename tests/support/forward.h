// Runs the model directly (no engine) for tests that compare logits between model files.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace kvserve::testing {

// Logits of every position of `tokens` in one batched forward pass with an f32 KV cache:
// [n_tokens, n_vocab].
std::vector<float> AllPositionLogits(const Model& model, const std::vector<int32_t>& tokens);

}  // namespace kvserve::testing
