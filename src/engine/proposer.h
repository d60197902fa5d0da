// Speculative decoding's source of drafts: a Proposer guesses the tokens that follow each
// decoding sequence; the engine feeds them to the target model in the step's batched forward and
// keeps those its own sampler would have chosen (EngineCore::Sample), so a proposer can only
// change speed, never a token. Implementations: NgramProposer (prompt lookup), DraftProposer (a
// smaller model with its own paged KV), AssistantProposer (a drafter reading the target's hidden
// state and cache: Gemma 4's assistant), HistoryProposer (what earlier requests of the same tenant
// read or produced), ReplayProposer (bench only: a known output with errors at a set rate).
// Called on the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace kvserve {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // seqs[i] is decoding (one pending token, tokens = prompt + output so far) and wants at most
  // max_tokens[i] >= 1 tokens to follow its tokens: writes them to seqs[i]->draft (left empty
  // when there is no guess).
  virtual void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) = 0;
  // The sequence leaves the engine (finished or aborted): drop whatever is kept for it.
  virtual void Forget(const Sequence& seq) { (void)seq; }
  // A block of the prefix cache (group 0) leaves memory: evicted for reuse, its tokens no longer
  // held by the cache.
  virtual void BlockEvicted(const BlockKey& key) { (void)key; }
  // Whether it reads Sequence::target_hidden (the engine then keeps it after every sample).
  virtual bool wants_target_hidden() const { return false; }
  // Whether it drafts after the step is scheduled (MtpProposer: its steps write the target's
  // cache at the drafts' positions): the planner then gives each sequence max_tokens[i]
  // placeholder drafts to schedule, and calls Propose with the scheduled chunks' sequences and
  // drafts; it must write exactly max_tokens[i] drafts (fewer shrink the chunk).
  virtual bool drafts_after_scheduling() const { return false; }
};

// The per-sequence depth rule: after a verify of n_draft drafts of which n_accepted were
// accepted, the next depth (most tokens to propose) within [floor, max]: one more after a full
// acceptance, else one past what was accepted.
int NextSpecDepth(int depth, int n_draft, int n_accepted, int floor, int max);

// The end of one greedy drafting step of the hidden-row drafters (Assistant, Mtp): row r of the
// step drafted for seqs[active[r]]; appends its argmax to that sequence's draft, then keeps, in
// order, the rows whose sequence wants more than step + 1 tokens (max_tokens), moving their next
// hidden rows to the front of `hidden`. Returns the old row of each kept one, in order.
// logits: [active.size(), n_vocab]; hidden_next: [active.size(), width]
std::vector<size_t> KeepGreedyDrafting(std::span<Sequence* const> seqs,
                                       std::span<const int> max_tokens, int step,
                                       std::vector<size_t>& active, const float* logits,
                                       int n_vocab, const float* hidden_next, size_t width,
                                       std::vector<float>& hidden);

}  // namespace kvserve
