#include "engine/proposer_replay.h"

#include <algorithm>

namespace kvserve {

ReplayProposer::ReplayProposer(std::map<std::string, std::vector<int32_t>> reference, double accept,
                               int n_vocab, uint64_t seed)
    : reference_(std::move(reference)), accept_(accept), n_vocab_(n_vocab), rng_(seed) {}

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
    for (size_t j = 0; j < n; ++j) {
      const int32_t right = ref[from + j];
      seq.draft.push_back(uniform(rng_) < accept_ ? right : (right + 1) % n_vocab_);
    }
  }
}

}  // namespace kvserve
