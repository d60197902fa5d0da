// Loads the llama.cpp reference cases of ../shared/reference (see its README) and compares logits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvserve::testing {

struct ReferenceCase {
  std::string name;
  std::string model;  // file name under models/ (a committed case: the synthesized file's path)
  int n_vocab = 0;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> greedy_tokens;
  std::vector<float> prompt_logits;  // [prompt_tokens.size(), n_vocab]
  std::vector<float> gen_logits;     // [greedy_tokens.size(), n_vocab]
};

// The three shared cases: gpt2-tiny-a, gpt2-tiny-b (gpt2-tiny-f32.gguf), stories260K-a.
std::vector<std::string> ReferenceCaseNames();
ReferenceCase LoadReferenceCase(const std::string& name);
// A case of reference/arch (its README): `name` like "qwen2-f32", model "arch/<name>.gguf".
ReferenceCase LoadArchReferenceCase(const std::string& name);

// A case committed under tests/data/llama-reference (its README): llama.cpp's outputs for a file
// `kvserve synth` makes, which the test makes again at `model_path` (an absolute path).
ReferenceCase LoadCommittedReferenceCase(const std::string& name, const std::string& model_path);

std::vector<float> ReadFloats(const std::string& path);
// The integers of array `key` in a reference's flat JSON ({"n_vocab": V, "prompt_tokens": [...],
// ...}); a test failure when it is missing.
std::vector<int32_t> JsonIntArray(const std::string& json, const std::string& key);
// A text file's contents; a test failure when it cannot be read.
std::string ReadTextFile(const std::string& path);
// max |a - b| over the row / max |ref| over the row.
double RelativeRowError(std::span<const float> ours, std::span<const float> ref);
// The largest RelativeRowError over the rows of n_vocab values in `ref` (ours has at least as
// many).
double MaxRelativeRowError(std::span<const float> ours, std::span<const float> ref, int n_vocab);

}  // namespace kvserve::testing
