// Speculative decoding's duty before each step: which decoding sequences get drafts, how many
// tokens each may draft (its depth, what is left of max_tokens and of the context, the back-off
// budget), the proposer that writes them, and the cost gate that keeps only the drafts worth
// verifying. Made from EngineOptions::spec; owns the proposer. Whether a draft is accepted is not
// decided here (EngineCore::Sample). Engine thread only.
//
// The cost gate: each proposed draft token j of a sequence whose acceptance estimate is p is
// expected to yield p^j tokens (all before it accepted too); the gate keeps the k most promising
// draft tokens of the step, k chosen to maximise the step's expected tokens per millisecond,
// (n_decoding + expected accepted) / T(n_decoding + k), T from the decode steps this engine timed
// (BatchCostTable). So a machine where verifying costs little drafts deep, one where it costs a
// step's worth drafts only what is likely accepted, and a control task whose drafts keep failing
// stops drafting (tried again now and then: AcceptanceEstimate::Idle).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/batch_cost_table.h"
#include "engine/engine.h"
#include "engine/proposer.h"
#include "engine/scheduler.h"
#include "engine/step_cost.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace kvserve {

// The cost gate's choice, pure arithmetic: of the proposed drafts (lengths[i] tokens for a
// sequence whose per-token acceptance estimate is p[i]), how many tokens of each to verify in a
// step that decodes n_decoding sequences, so that (n_decoding + expected accepted tokens) /
// costs.Predict(n_decoding + kept tokens) is the largest (ties keep fewer). All of them when
// `costs` knows nothing yet. Two costs outside the step count too: drafting itself
// (`draft_ms_per_token`, the proposer's measured time per drafted token: a second model's or an
// MTP layer's forward), and on a model whose recurrent state cannot be taken back, the tokens a
// rejection makes the sequence recompute (rollback_tokens[i], empty = none): the candidate j of
// a sequence adds (p^(j-1) - p^j) · R, the chance that its draft fails at token j times the
// recompute's cost R: r times `line`'s cost per token where it is a fitted line with a fixed part
// (over the decoding steps, recomputes included: on a hybrid a recomputed token costs prefill's
// pace, not a verify row's), else T(n_decoding + r) - T(n_decoding). `line` also stands in for T
// where `costs` knows nothing yet.
std::vector<int> KeptDraftTokens(std::span<const double> p, std::span<const int> lengths,
                                 int n_decoding, const BatchCostTable& costs,
                                 std::span<const int> rollback_tokens = {},
                                 double draft_ms_per_token = 0, const StepCost& line = {});

class DraftPlanner {
 public:
  // n_draft_blocks: the draft model's KV pool (options.spec.method kDraft; at least 1 is used).
  // target and target_kv (borrowed) are what a drafter reading the target's state reads.
  DraftPlanner(const EngineOptions& options, int n_draft_blocks, const Model& target,
               KvCache& target_kv);

  bool enabled() const { return proposer_ != nullptr; }
  // Whether the proposer reads Sequence::target_hidden.
  bool wants_target_hidden() const { return proposer_ && proposer_->wants_target_hidden(); }
  // Clears every running sequence's draft, then asks the proposer for the decoding ones that
  // may speculate (none under recompute, none past the back-off budget).
  void Plan(const Scheduler& scheduler);
  // After the step is scheduled: a proposer that drafts after scheduling writes the drafts of the
  // chunks that verify some (Proposer::drafts_after_scheduling), and chunks whose sequence got
  // fewer shrink; every other sequence's draft is cleared. Does nothing for other proposers.
  void Fill(StepPlan& plan);
  // After a verify of n_draft drafts of which n_accepted were accepted: the sequence's next depth.
  void Observe(Sequence& seq, int n_draft, int n_accepted) const;
  // The sequence leaves the engine.
  void Forget(const Sequence& seq);
  // A prefix-cache block leaves memory (BlockManager's eviction hook).
  void BlockEvicted(const BlockKey& key) {
    if (proposer_) proposer_->BlockEvicted(key);
  }
  // A step of decoding chunks only took ms milliseconds: n_tokens of one token and its drafts
  // each, and n_recomputed more that hybrid sequences sent back to a checkpoint recomputed
  // before theirs (the table learns steps without those; the line all of them).
  void ObserveDecodeStep(int n_tokens, int n_recomputed, double ms);

 private:
  SpecOptions spec_;
  int n_ctx_ = 0;
  bool recompute_ = false;
  // Cuts the proposed drafts of `seqs` to those the cost gate keeps (see above).
  void Gate(const Scheduler& scheduler, std::span<Sequence* const> seqs, int n_decoding);
  // Runs the proposer, timing it per drafted token (draft_ms_per_token_, a decayed mean).
  void ProposeTimed(std::span<Sequence* const> seqs, std::span<const int> max_tokens);

  double draft_ms_per_token_ = 0;
  StepCostModel step_line_;
  std::shared_ptr<Proposer> proposer_;  // null: no speculative decoding
  BatchCostTable step_costs_;
};

}  // namespace kvserve
