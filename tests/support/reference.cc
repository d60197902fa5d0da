#include "support/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>

#include "support/paths.h"

namespace kvserve::testing {

std::vector<std::string> ReferenceCaseNames() {
  return {"gpt2-tiny-a", "gpt2-tiny-b", "stories260K-a"};
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<int32_t> JsonIntArray(const std::string& json, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\"\\s*:\\s*\\[([^\\]]*)\\]");
  std::vector<int32_t> out;
  if (!std::regex_search(json, match, pattern)) {
    ADD_FAILURE() << "no " << key << " in reference json";
    return out;
  }
  const std::string list = match[1];
  const std::regex number("-?[0-9]+");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), number);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoi(it->str()));
  }
  return out;
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.begin() + out.size() * sizeof(float),
            reinterpret_cast<char*>(out.data()));
  return out;
}

namespace {

// Reads <prefix>.json, .logits.f32 and .gen.logits.f32.
ReferenceCase ReadCase(const std::string& name, const std::string& model,
                       const std::string& prefix) {
  ReferenceCase c;
  c.name = name;
  c.model = model;
  const std::string json = ReadTextFile(prefix + ".json");
  std::smatch match;
  if (std::regex_search(json, match, std::regex("\"n_vocab\"\\s*:\\s*([0-9]+)"))) {
    c.n_vocab = std::stoi(match[1]);
  }
  c.prompt_tokens = JsonIntArray(json, "prompt_tokens");
  c.greedy_tokens = JsonIntArray(json, "greedy_tokens");
  c.prompt_logits = ReadFloats(prefix + ".logits.f32");
  c.gen_logits = ReadFloats(prefix + ".gen.logits.f32");
  EXPECT_EQ(c.prompt_logits.size(), c.prompt_tokens.size() * c.n_vocab);
  EXPECT_EQ(c.gen_logits.size(), c.greedy_tokens.size() * c.n_vocab);
  return c;
}

}  // namespace

ReferenceCase LoadReferenceCase(const std::string& name) {
  const bool gpt2 = name.rfind("gpt2", 0) == 0;
  return ReadCase(name, gpt2 ? "gpt2-tiny-f32.gguf" : "stories260K.gguf", ReferencePath(name));
}

ReferenceCase LoadArchReferenceCase(const std::string& name) {
  return ReadCase(name, "arch/" + name + ".gguf", ReferencePath("arch/" + name));
}

ReferenceCase LoadCommittedReferenceCase(const std::string& name, const std::string& model_path) {
  return ReadCase(name, model_path, TestDataPath("llama-reference/" + name));
}

double RelativeRowError(std::span<const float> ours, std::span<const float> ref) {
  double max_ref = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ours[i]) - ref[i]));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

double MaxRelativeRowError(std::span<const float> ours, std::span<const float> ref, int n_vocab) {
  double worst = 0.0;
  for (size_t row = 0; (row + 1) * n_vocab <= ref.size(); ++row) {
    worst = std::max(worst, RelativeRowError(ours.subspan(row * n_vocab, n_vocab),
                                             ref.subspan(row * n_vocab, n_vocab)));
  }
  return worst;
}

}  // namespace kvserve::testing
