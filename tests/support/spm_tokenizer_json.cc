#include "support/spm_tokenizer_json.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kvserve::testing {

using nlohmann::ordered_json;

namespace {

// UTF-8 code point boundaries of `text` (0 and size excluded).
std::vector<size_t> CharBoundaries(const std::string& text) {
  std::vector<size_t> out;
  for (size_t i = 1; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) out.push_back(i);
  }
  return out;
}

}  // namespace

ordered_json SpmTokenizerJson(const GgufFile& gguf) {
  const auto tokens = gguf.GetStringArray("tokenizer.ggml.tokens").value();
  const auto scores = gguf.GetFloatArray("tokenizer.ggml.scores").value();
  const auto types = gguf.GetIntArray("tokenizer.ggml.token_type").value();
  std::map<std::string, int> ids;
  ordered_json vocab = ordered_json::object();
  ordered_json added = ordered_json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string text(tokens[id]);
    vocab[text] = id;
    ids[text] = static_cast<int>(id);
    if (types[id] == 2 || types[id] == 3) {
      added.push_back({{"id", id}, {"content", text}, {"special", true}});
    }
  }
  std::vector<size_t> order;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == 1) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  ordered_json merges = ordered_json::array();
  for (size_t id : order) {
    const std::string text(tokens[id]);
    for (size_t cut : CharBoundaries(text)) {
      const std::string left = text.substr(0, cut), right = text.substr(cut);
      if (ids.count(left) && ids.count(right)) merges.push_back(left + " " + right);
    }
  }
  return {
      {"version", "1.0"},
      {"truncation", {{"max_length", 8}}},  // must be ignored
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
      {"pre_tokenizer", nullptr},
      {"decoder",
       {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merges}}},
  };
}

}  // namespace kvserve::testing
