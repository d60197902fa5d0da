#include "engine/draft_planner.h"

#include <algorithm>

#include "engine/proposer_draft.h"
#include "engine/proposer_history.h"
#include "engine/proposer_ngram.h"

namespace kvserve {

namespace {

std::shared_ptr<Proposer> MakeProposer(const EngineOptions& options, int n_draft_blocks) {
  const SpecOptions& spec = options.spec;
  if (spec.proposer) return spec.proposer;
  if (spec.method == SpecMethod::kNgram) {
    return std::make_shared<NgramProposer>(spec.ngram_min, spec.ngram_max);
  }
  if (spec.method == SpecMethod::kHistory || spec.method == SpecMethod::kNgramHistory) {
    return std::make_shared<HistoryProposer>(
        HistoryProposerOptions{.ngram = spec.ngram_max,
                               .max_tokens = spec.history_tokens,
                               .prompt_lookup = spec.method == SpecMethod::kNgramHistory,
                               .prompt_ngram_min = spec.ngram_min,
                               .prompt_ngram_max = spec.ngram_max});
  }
  if (spec.method == SpecMethod::kDraft && spec.draft_model != nullptr) {
    // The draft model's cache: the target's type where uniform, else its first group's.
    return std::make_shared<DraftProposer>(*spec.draft_model, options.kv_type.group(0),
                                           options.block_size, std::max(1, n_draft_blocks),
                                           options.n_threads);
  }
  return nullptr;
}

}  // namespace

DraftPlanner::DraftPlanner(const EngineOptions& options, int n_draft_blocks)
    : spec_(options.spec),
      n_ctx_(options.n_ctx),
      recompute_(options.recompute),
      proposer_(MakeProposer(options, n_draft_blocks)) {}

void DraftPlanner::Plan(const Scheduler& scheduler) {
  if (!proposer_) return;
  int n_decoding = 0;
  for (const auto& seq : scheduler.running()) {
    seq->draft.clear();
    if (seq->n_pending() == 1) ++n_decoding;
  }
  if (n_decoding == 0 || recompute_) return;
  // Back-off: every live sequence (prefilling or waiting ones soon decode too) counts as load.
  const int n_live = static_cast<int>(scheduler.running().size() + scheduler.waiting().size());
  const int share = (spec_.batch_tokens - n_live) / n_live;
  const int floor = std::max(1, spec_.min_tokens);
  if (share < floor) return;
  std::vector<Sequence*> seqs;
  std::vector<int> max_tokens;
  for (const auto& owned : scheduler.running()) {
    Sequence* seq = owned.get();
    if (seq->n_pending() != 1 || !seq->request.speculative) continue;
    if (seq->spec_depth == 0) seq->spec_depth = spec_.max_tokens;
    // Drafts past max_tokens or the context would only follow a finish.
    const int k =
        std::min({seq->spec_depth, share, spec_.max_tokens,
                  seq->request.max_tokens - seq->n_generated() - 1, n_ctx_ - 1 - seq->n_computed});
    if (k < floor) continue;
    seqs.push_back(seq);
    max_tokens.push_back(k);
  }
  if (seqs.empty()) return;
  proposer_->Propose(seqs, max_tokens);
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<int32_t>& draft = seqs[i]->draft;
    if (static_cast<int>(draft.size()) > max_tokens[i]) draft.resize(max_tokens[i]);
    if (static_cast<int>(draft.size()) < floor) draft.clear();
  }
}

void DraftPlanner::Observe(Sequence& seq, int n_draft, int n_accepted) const {
  if (n_draft == 0) return;
  seq.spec_depth =
      NextSpecDepth(seq.spec_depth, n_draft, n_accepted, spec_.min_tokens, spec_.max_tokens);
}

void DraftPlanner::Forget(const Sequence& seq) {
  if (proposer_) proposer_->Forget(seq);
}

}  // namespace kvserve
