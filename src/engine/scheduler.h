// Continuous batching: every step admits waiting sequences while blocks and budgets allow, mixes
// one decode token per running sequence with chunks of prompts (chunked prefill) under a token
// budget, and preempts the newest running sequence when blocks run out (its blocks are freed and
// it is recomputed later, reusing whatever prefix is still cached). Never touches tensors.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "engine/step_cost.h"
#include "kv/block_manager.h"

namespace kvserve {

struct SchedulerOptions {
  int max_num_seqs = 16;
  int max_batched_tokens = 512;
  // No-cache baseline: after every sampled token a sequence's K/V counts as gone, so the next step
  // recomputes it from position 0 (into the same blocks). Needs the prefix cache off.
  bool recompute = false;
  // In-batch prefix sharing (with the prefix cache on): a waiting sequence whose next uncached
  // full prompt block is still being computed by a running sequence waits for it (others may be
  // admitted meanwhile), then finds it in the prefix cache: a shared prefix is computed once.
  bool share_in_batch = false;
  // Per-step time target in milliseconds (0 = off). While a running sequence decodes and the
  // step cost is known (SetStepCost), prefill and draft tokens are cut so that the step's
  // predicted time stays under it, but never below max(min_prefill_tokens, block size) of them.
  double max_step_ms = 0;
  // With max_step_ms: the target is also at most this many decode-only steps (the predicted cost
  // of the decoding sequences' own tokens), so that on a fast model a prompt stalls the streams
  // for a few of their steps, not for max_step_ms. 0 = max_step_ms alone.
  double max_step_decodes = 0;
  int min_prefill_tokens = 16;
  // An encoder-decoder model's cross-attention group (Model::cross_group), whose blocks hold each
  // sequence's encoded input; -1: a decoder-only model.
  int cross_group = -1;
};

// One sequence's share of a step: compute tokens [n_computed, n_computed + n_tokens). With
// n_draft > 0 (a decode chunk only) the last n_draft of them are seq->draft[0, n_draft), fed after
// the sequence's pending token, and each of the n_draft + 1 fed tokens gets a logits row.
struct ScheduledChunk {
  Sequence* seq;
  int n_tokens;
  bool sample;  // the chunk reaches the end of the sequence: sample the next token
  int n_draft = 0;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  int n_tokens = 0;  // decoder tokens and encoder inputs' tokens
  // Sequences whose encoder input runs before this step's chunks (an encoder-decoder model): the
  // whole input each, into its cross_blocks.
  std::vector<Sequence*> encodes;
  bool empty() const { return chunks.empty(); }
};

// What a step produced for one sequence that sampled: the token and what its stop rules made of
// it (appended or not, the text to emit, a finish).
struct SequenceOutput {
  Sequence* seq;
  SampleResult sample;
  StopChecker::Outcome outcome;
};

// What a step sampled, per chunk that samples, in plan order: the sample after each draft token
// its sequence's sampler confirmed (it equals that draft), then the sample after them: one result
// without drafts, n_accepted + 1 with them. The engine's Sample decides acceptance (the one place
// that does); Postprocess only reads the count.
using StepSamples = std::vector<std::vector<SampleResult>>;

class Scheduler {
 public:
  // `blocks` is borrowed. `reclaim` is asked to free pinned blocks (sessions) when a waiting
  // sequence cannot be admitted and nothing is running; it returns false when it has none left.
  Scheduler(BlockManager& blocks, const SchedulerOptions& options, std::function<bool()> reclaim);

  void Add(std::unique_ptr<Sequence> seq);  // to the back of the queue
  // Called with a waiting sequence's tokens and salt just before it takes its cached prefix
  // (the disk tier reads missing prefix blocks back into the prefix cache). Empty: none.
  void SetPrefixRestore(
      std::function<void(std::span<const int32_t> tokens, const std::string& salt)> restore) {
    restore_ = std::move(restore);
  }
  // Called for a waiting encoder-decoder sequence just before it looks for its input's
  // cross-attention blocks (BlockManager::AllocateInput), with the input's key, its blocks and
  // its tokens (the disk tier reads the input's blocks back when memory lacks some). Empty: none.
  void SetInputRestore(
      std::function<void(const BlockKey& input_key, int n_blocks, int n_tokens)> restore) {
    input_restore_ = std::move(restore);
  }
  // The measured step cost behind max_step_ms (the engine loop's fit; any numbers in tests).
  void SetStepCost(const StepCost& cost) { cost_ = cost; }
  // Prefill and draft tokens the next step may carry beyond one decode token per decoding
  // sequence: the token budget, or under max_step_ms what the target leaves (at least the floor).
  int PrefillAllowance() const;
  StepPlan Schedule();
  // Marks the plan's tokens computed, registers full blocks in the prefix cache, releases the
  // window groups' blocks that slid out of every window (BlockManager::SlideWindows), and passes
  // each sampled token (StepSamples) through its sequence's stop rules, appending it where they
  // say so. A chunk's drafts count as computed as far as its samples confirmed them (one sample
  // per accepted draft, before the last); the blocks of rejected drafts are released. Clears
  // every draft. Finished sequences stay until Remove.
  std::vector<SequenceOutput> Postprocess(const StepPlan& plan, const StepSamples& sampled);
  // Removes a sequence (finished or aborted), frees its blocks, and returns it.
  std::unique_ptr<Sequence> Remove(Sequence* seq);

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  // Tokens a decoding sequence recomputes after a verify that rejects a draft: 0, but on a model
  // whose recurrent state cannot be taken back (BlockManager::holds_states) those since its last
  // block boundary with a state, the pending one included.
  int RollbackTokens(const Sequence& seq) const;
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  uint64_t preemptions() const { return preemptions_; }
  // Speculative decoding totals: chunks verified with drafts, drafted tokens, accepted ones, and
  // accepted ones by draft position (index 0 = the first drafted token).
  uint64_t spec_drafts() const { return spec_drafts_; }
  uint64_t spec_draft_tokens() const { return spec_draft_tokens_; }
  uint64_t spec_accepted_tokens() const { return spec_accepted_tokens_; }
  const std::vector<uint64_t>& spec_accepted_by_position() const { return spec_accepted_by_pos_; }

 private:
  void ScheduleRunning(StepPlan& plan, int& budget);
  void AdmitWaiting(StepPlan& plan, int& budget);
  // Keys of the full prompt blocks of `seq` (as the prefix cache names them), computed once.
  const std::vector<BlockKey>& PromptKeys(Sequence& seq);
  // Adds the keys of seq's prompt blocks not yet computed to `in_flight`.
  void AddInFlight(Sequence& seq, std::set<BlockKey>& in_flight);
  // Extends decode chunks with their sequences' drafts, with the budget and blocks left.
  void AddDrafts(StepPlan& plan, int& budget);
  void Preempt(size_t running_index);
  // An encoder-decoder's waiting sequence: takes its input's cross-attention blocks (cached ones
  // hold its encoding; else the plan encodes it, its tokens from the budget). False when the
  // blocks or the budget lack room (nothing taken).
  bool AdmitEncoderInput(Sequence& seq, StepPlan& plan, int& budget);
  // Gives back the cross-attention blocks of an encoder-decoder's sequence.
  void FreeEncoderInput(Sequence& seq);
  // Tokens of seq's next chunk: its pending ones within the budget and, for a prefill chunk
  // (more than one token pending), within prefill_left_ (which that chunk then spends).
  int ChunkTokens(const Sequence& seq, int budget) const;

  BlockManager& blocks_;
  SchedulerOptions options_;
  std::function<bool()> reclaim_;
  std::function<void(std::span<const int32_t>, const std::string&)> restore_;
  std::function<void(const BlockKey&, int, int)> input_restore_;
  StepCost cost_;
  int prefill_left_ = 0;  // this step's prefill and draft tokens still allowed
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order, oldest first
  std::deque<std::unique_ptr<Sequence>> waiting_;
  uint64_t next_arrival_ = 0;
  uint64_t preemptions_ = 0;
  uint64_t spec_drafts_ = 0;
  uint64_t spec_draft_tokens_ = 0;
  uint64_t spec_accepted_tokens_ = 0;
  std::vector<uint64_t> spec_accepted_by_pos_;
};

}  // namespace kvserve
