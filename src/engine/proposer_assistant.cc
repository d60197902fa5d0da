#include "engine/proposer_assistant.h"

#include <algorithm>
#include <cstring>

namespace kvserve {

AssistantProposer::AssistantProposer(const Model& drafter_model, const DraftTarget& target,
                                     KvCache& kv, int n_threads)
    : model_(drafter_model),
      drafter_(*drafter_model.hidden_state_drafter()),
      target_(target),
      kv_(kv),
      workspace_(drafter_model.backend().NewWorkspace(WorkspaceOptions{.n_threads = n_threads})) {}

void AssistantProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  const size_t width = static_cast<size_t>(target_.n_embd);
  const int n_vocab = model_.config().n_vocab;
  std::vector<size_t> active;  // indices into seqs, in batch row order
  batch_.Clear(kv_.n_groups());
  hidden_.clear();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& seq = *seqs[i];
    // Only a sequence whose cache holds every token but the pending one, with the hidden row
    // that chose it.
    if (seq.n_pending() != 1 || seq.target_hidden.size() != width || seq.tokens.size() < 2) {
      continue;
    }
    const int row = static_cast<int>(active.size());
    batch_.tokens.push_back(seq.tokens.back());
    batch_.positions.push_back(static_cast<int32_t>(seq.tokens.size()) - 1);
    batch_.seq_index.push_back(row);
    batch_.logit_rows.push_back(row);
    for (size_t g = 0; g < batch_.kv_groups.size(); ++g) {
      batch_.kv_groups[g].block_tables.push_back(seq.blocks.group(g));
    }
    hidden_.insert(hidden_.end(), seq.target_hidden.begin(), seq.target_hidden.end());
    active.push_back(i);
  }
  for (int step = 0; !active.empty(); ++step) {
    const size_t n = active.size();
    logits_.resize(n * n_vocab);
    hidden_next_.resize(n * width);
    drafter_.Draft(target_, batch_, hidden_.data(), kv_, *workspace_, logits_.data(),
                   hidden_next_.data());
    ++steps_;
    // Rows whose sequence wants more drafts go on, with their draft and next hidden row.
    const std::vector<size_t> rows =
        KeepGreedyDrafting(seqs, max_tokens, step, active, logits_.data(), n_vocab,
                           hidden_next_.data(), width, hidden_);
    const size_t kept = rows.size();
    for (size_t k = 0; k < kept; ++k) {
      const size_t r = rows[k];
      batch_.tokens[k] = seqs[active[k]]->draft.back();
      batch_.positions[k] = batch_.positions[r];
      batch_.seq_index[k] = static_cast<int32_t>(k);
      batch_.logit_rows[k] = static_cast<int32_t>(k);
      for (KvGroupBatch& group : batch_.kv_groups) {
        if (k != r) group.block_tables[k] = std::move(group.block_tables[r]);
      }
    }
    batch_.tokens.resize(kept);
    batch_.positions.resize(kept);
    batch_.seq_index.resize(kept);
    batch_.logit_rows.resize(kept);
    for (KvGroupBatch& group : batch_.kv_groups) group.block_tables.resize(kept);
  }
}

}  // namespace kvserve
