#include "engine/proposer_ngram.h"

#include <algorithm>
#include <optional>

namespace kvserve {

NgramProposer::NgramProposer(int ngram_min, int ngram_max)
    : ngram_min_(std::max(1, ngram_min)), ngram_max_(std::max(ngram_min_, ngram_max)) {}

namespace {

// What follows the last occurrence of `suffix` in text[0, end) (at most max_tokens of it, up to
// the text's end); nullopt when it does not occur.
std::optional<std::vector<int32_t>> Follows(std::span<const int32_t> suffix,
                                            std::span<const int32_t> text, int end,
                                            int max_tokens) {
  const int n = static_cast<int>(suffix.size());
  for (int start = end - n; start >= 0; --start) {
    if (!std::equal(suffix.begin(), suffix.end(), text.begin() + start)) continue;
    const int from = start + n;
    const int count = std::min(max_tokens, static_cast<int>(text.size()) - from);
    return std::vector<int32_t>(text.begin() + from, text.begin() + from + count);
  }
  return std::nullopt;
}

}  // namespace

std::vector<int32_t> NgramProposer::Lookup(std::span<const int32_t> tokens, int ngram_min,
                                           int ngram_max, int max_tokens,
                                           std::span<const int32_t> source) {
  const int size = static_cast<int>(tokens.size());
  for (int n = std::min(ngram_max, size - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size - n);
    // Earlier occurrences only: starts size - n - 1 down to 0.
    if (auto draft = Follows(suffix, tokens, size - 1, max_tokens)) return *std::move(draft);
    const int source_size = static_cast<int>(source.size());
    if (n >= source_size) continue;  // a match must leave a token to draft
    if (auto draft = Follows(suffix, source, source_size - 1, max_tokens)) {
      return *std::move(draft);
    }
  }
  return {};
}

void NgramProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->draft =
        Lookup(seqs[i]->tokens, ngram_min_, ngram_max_, max_tokens[i], seqs[i]->encoder_input);
  }
}

}  // namespace kvserve
