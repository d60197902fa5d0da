#include "engine/proposer_draft.h"

#include <algorithm>

namespace kvserve {

DraftProposer::DraftProposer(const Model& model, KvType kv_type, int block_size, int n_blocks,
                             int n_threads)
    : kv_(model.kv_spec(), kv_type, block_size, n_blocks, model.backend().allocator()),
      blocks_(n_blocks, block_size, /*prefix_caching=*/false),
      runner_(model, kv_, n_threads) {}

void DraftProposer::Forget(const Sequence& seq) {
  auto it = states_.find(&seq);
  if (it == states_.end()) return;
  blocks_.Free(it->second.table);
  states_.erase(it);
}

bool DraftProposer::Reserve(State& state, int n_tokens) {
  return blocks_.Grow(state.table, n_tokens);
}

// Sequences not drafting now (preempted, or backed off) give their blocks back first.
void DraftProposer::FreeOthers(std::span<Sequence* const> keep) {
  for (auto it = states_.begin(); it != states_.end();) {
    if (std::find(keep.begin(), keep.end(), it->first) != keep.end()) {
      ++it;
      continue;
    }
    blocks_.Free(it->second.table);
    it = states_.erase(it);
  }
}

namespace {
int32_t ArgMax(std::span<const float> x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}
}  // namespace

void DraftProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  // Catch-up: each sequence feeds its tokens past the longest prefix the pool still holds (at
  // least its last token, whose logits give the first draft).
  std::vector<size_t> active;  // indices into seqs
  std::vector<int> first(seqs.size(), 0);
  bool freed_others = false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<int32_t>& tokens = seqs[i]->tokens;
    State& state = states_[seqs[i]];
    const size_t common =
        std::mismatch(state.computed.begin(), state.computed.end(), tokens.begin(), tokens.end())
            .first -
        state.computed.begin();
    const int n_keep = static_cast<int>(std::min(common, tokens.size() - 1));
    state.computed.resize(n_keep);
    blocks_.Truncate(state.table, n_keep);
    const int need = static_cast<int>(tokens.size()) + max_tokens[i] - 1;
    bool ok = Reserve(state, need);
    if (!ok && !freed_others) {
      FreeOthers(seqs);
      freed_others = true;
      ok = Reserve(state, need);
    }
    if (!ok) {
      blocks_.Free(state.table);
      state.computed.clear();
      continue;
    }
    first[i] = n_keep;
    active.push_back(i);
  }
  std::vector<RunnerChunk> chunks;
  for (size_t i : active) {
    State& state = states_[seqs[i]];
    const std::vector<int32_t>& tokens = seqs[i]->tokens;
    chunks.push_back({.tokens = std::span<const int32_t>(tokens).subspan(first[i]),
                      .first = first[i],
                      .block_table = &state.table,
                      .n_logit_rows = 1});
    state.computed.assign(tokens.begin(), tokens.end());
  }
  if (chunks.empty()) return;
  StepLogits logits = runner_.RunChunks(chunks);
  ++forwards_;
  for (size_t a = 0; a < active.size(); ++a) {
    seqs[active[a]]->draft = {ArgMax(logits.row(a))};
  }
  // Drafting: one forward per further position, over the sequences that want more.
  for (int step = 1;; ++step) {
    std::vector<size_t> more;
    chunks.clear();
    for (size_t i : active) {
      if (step >= max_tokens[i]) continue;
      State& state = states_[seqs[i]];
      state.computed.push_back(seqs[i]->draft.back());
      const int pos = static_cast<int>(state.computed.size()) - 1;
      chunks.push_back({.tokens = std::span<const int32_t>(state.computed).subspan(pos),
                        .first = pos,
                        .block_table = &state.table,
                        .n_logit_rows = 1});
      more.push_back(i);
    }
    if (chunks.empty()) break;
    logits = runner_.RunChunks(chunks);
    ++forwards_;
    for (size_t m = 0; m < more.size(); ++m) seqs[more[m]]->draft.push_back(ArgMax(logits.row(m)));
  }
}

}  // namespace kvserve
