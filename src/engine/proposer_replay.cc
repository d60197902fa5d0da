#include "engine/proposer_replay.h"

#include <algorithm>

namespace kvserve {

ReplayProposer::ReplayProposer(std::map<std::string, std::vector<int32_t>> reference, double accept,
                               int n_vocab, uint64_t seed)
    : reference_(std::move(reference)), accept_(accept), n_vocab_(n_vocab), rng_(seed) {}

ReplayProposer::ReplayProposer(std::map<std::string, std::vector<int32_t>> reference,
                               const std::map<std::string, size_t>& prompt_sizes, int span)
    : reference_(std::move(reference)), accept_(1.0), n_vocab_(1), rng_(0) {
  for (const auto& [id, tokens] : reference_) {
    const auto size = prompt_sizes.find(id);
    draftable_[id] = RepeatedPositions(tokens, size != prompt_sizes.end() ? size->second : 0, span);
  }
}

std::vector<bool> RepeatedPositions(std::span<const int32_t> tokens, size_t from, int span) {
  std::vector<bool> repeated(tokens.size(), false);
  const auto n = static_cast<ptrdiff_t>(span);
  for (ptrdiff_t j = static_cast<ptrdiff_t>(from); j < static_cast<ptrdiff_t>(tokens.size()); ++j) {
    const ptrdiff_t start = j + 1 - n;  // the run tokens[start, j]
    for (ptrdiff_t earlier = start - 1; earlier >= 0 && !repeated[j]; --earlier) {
      repeated[j] =
          std::equal(tokens.begin() + start, tokens.begin() + j + 1, tokens.begin() + earlier);
    }
  }
  return repeated;
}

void ReplayProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& seq = *seqs[i];
    auto it = reference_.find(seq.request.id);
    if (it == reference_.end()) continue;
    const std::vector<int32_t>& ref = it->second;
    const size_t from = seq.tokens.size();
    if (from >= ref.size() || !std::equal(seq.tokens.begin(), seq.tokens.end(), ref.begin()))
      continue;
    const size_t n = std::min(ref.size() - from, static_cast<size_t>(max_tokens[i]));
    if (auto marks = draftable_.find(seq.request.id); marks != draftable_.end()) {
      for (size_t j = 0; j < n && marks->second[from + j]; ++j) seq.draft.push_back(ref[from + j]);
      continue;
    }
    for (size_t j = 0; j < n; ++j) {
      const int32_t right = ref[from + j];
      seq.draft.push_back(uniform(rng_) < accept_ ? right : (right + 1) % n_vocab_);
    }
  }
}

}  // namespace kvserve
