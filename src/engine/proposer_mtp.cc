#include "engine/proposer_mtp.h"

#include "kv/kv_layer_view.h"

namespace kvserve {

MtpProposer::MtpProposer(const Model& target, KvCache& kv, int n_threads)
    : model_(target),
      drafter_(*target.nextn_drafter()),
      kv_(kv),
      workspace_(target.backend().NewWorkspace(WorkspaceOptions{.n_threads = n_threads})) {}

void MtpProposer::AddRow(const Sequence& seq, int32_t token, int32_t position, int row) {
  batch_.tokens.push_back(token);
  batch_.positions.push_back(position);
  batch_.seq_index.push_back(row);
  batch_.logit_rows.push_back(row);
  for (size_t g = 0; g < batch_.kv_groups.size(); ++g) {
    KvGroupBatch& group = batch_.kv_groups[g];
    group.block_tables.push_back(seq.blocks.group(g));
    group.slots.push_back(KvSlot(group.block_tables.back().data(), kv_.block_size(), position));
  }
}

void MtpProposer::Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  const size_t width = static_cast<size_t>(drafter_.hidden_width());
  const int n_vocab = model_.config().n_vocab;
  std::vector<size_t> active;  // indices into seqs, in row order
  hidden_.clear();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& seq = *seqs[i];
    // The hidden row that chose the last token (position P) must be there.
    if (seq.target_hidden.size() != width || seq.tokens.size() < 2 || max_tokens[i] < 1) continue;
    hidden_.insert(hidden_.end(), seq.target_hidden.begin(), seq.target_hidden.end());
    active.push_back(i);
  }
  for (int step = 0; !active.empty(); ++step) {
    const size_t n = active.size();
    batch_.Clear(kv_.n_groups());
    for (size_t r = 0; r < n; ++r) {
      const Sequence& seq = *seqs[active[r]];
      const int32_t pending = static_cast<int32_t>(seq.tokens.size()) - 1;
      const int32_t token = step == 0 ? seq.tokens.back() : seq.draft.back();
      AddRow(seq, token, pending + step, static_cast<int>(r));
    }
    logits_.resize(n * n_vocab);
    hidden_next_.resize(n * width);
    drafter_.Draft(batch_, hidden_.data(), kv_, *workspace_, logits_.data(), hidden_next_.data());
    ++steps_;
    KeepGreedyDrafting(seqs, max_tokens, step, active, logits_.data(), n_vocab, hidden_next_.data(),
                       width, hidden_);
  }
}

}  // namespace kvserve
