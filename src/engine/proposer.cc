#include "engine/proposer.h"

#include <algorithm>
#include <cstring>

namespace kvserve {

int NextSpecDepth(int depth, int n_draft, int n_accepted, int floor, int max) {
  const int next = n_accepted >= n_draft ? depth + 1 : n_accepted + 1;
  return std::clamp(next, std::max(floor, 1), std::max(max, 1));
}

std::vector<size_t> KeepGreedyDrafting(std::span<Sequence* const> seqs,
                                       std::span<const int> max_tokens, int step,
                                       std::vector<size_t>& active, const float* logits,
                                       int n_vocab, const float* hidden_next, size_t width,
                                       std::vector<float>& hidden) {
  std::vector<size_t> kept_rows;
  for (size_t r = 0; r < active.size(); ++r) {
    const float* row = logits + r * n_vocab;
    Sequence& seq = *seqs[active[r]];
    seq.draft.push_back(static_cast<int32_t>(std::max_element(row, row + n_vocab) - row));
    if (step + 1 >= max_tokens[active[r]]) continue;
    const size_t kept = kept_rows.size();
    active[kept] = active[r];
    std::memcpy(hidden.data() + kept * width, hidden_next + r * width, sizeof(float) * width);
    kept_rows.push_back(r);
  }
  active.resize(kept_rows.size());
  hidden.resize(kept_rows.size() * width);
  return kept_rows;
}

}  // namespace kvserve
