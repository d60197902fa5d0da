// Speculative decoding's duty before each step: which decoding sequences get drafts, how many
// tokens each may draft (its depth, what is left of max_tokens and of the context, the back-off
// budget), and the proposer that writes them. Made from EngineOptions::spec; owns the proposer.
// Whether a draft is accepted is not decided here (EngineCore::Sample). Engine thread only.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/proposer.h"
#include "engine/scheduler.h"

namespace kvserve {

class DraftPlanner {
 public:
  // n_draft_blocks: the draft model's KV pool (options.spec.method kDraft; at least 1 is used).
  DraftPlanner(const EngineOptions& options, int n_draft_blocks);

  bool enabled() const { return proposer_ != nullptr; }
  // Clears every running sequence's draft, then asks the proposer for the decoding ones that
  // may speculate (none under recompute, none past the back-off budget).
  void Plan(const Scheduler& scheduler);
  // After a verify of n_draft drafts of which n_accepted were accepted: the sequence's next depth.
  void Observe(Sequence& seq, int n_draft, int n_accepted) const;
  // The sequence leaves the engine.
  void Forget(const Sequence& seq);

 private:
  SpecOptions spec_;
  int n_ctx_ = 0;
  bool recompute_ = false;
  std::shared_ptr<Proposer> proposer_;  // null: no speculative decoding
};

}  // namespace kvserve
