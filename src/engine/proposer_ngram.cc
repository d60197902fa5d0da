#include "engine/proposer_ngram.h"

#include <algorithm>

namespace kvserve {

NgramProposer::NgramProposer(int ngram_min, int ngram_max)
    : ngram_min_(std::max(1, ngram_min)), ngram_max_(std::max(ngram_min_, ngram_max)) {}

std::vector<int32_t> NgramProposer::Lookup(std::span<const int32_t> tokens, int ngram_min,
                                           int ngram_max, int max_tokens) {
  const int size = static_cast<int>(tokens.size());
  for (int n = std::min(ngram_max, size - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size - n);
    // Most recent earlier occurrence first: start positions size - n - 1 down to 0.
    for (int start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n;
      const int count = std::min(max_tokens, size - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

void NgramProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->draft = Lookup(seqs[i]->tokens, ngram_min_, ngram_max_, max_tokens[i]);
  }
}

}  // namespace kvserve
