#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvserve {

Scheduler::Scheduler(BlockManager& blocks, const SchedulerOptions& options,
                     std::function<bool()> reclaim)
    : blocks_(blocks), options_(options), reclaim_(std::move(reclaim)) {}

void Scheduler::Add(std::unique_ptr<Sequence> seq) {
  seq->arrival = next_arrival_++;
  waiting_.push_back(std::move(seq));
}

void Scheduler::Preempt(size_t running_index) {
  std::unique_ptr<Sequence> seq = std::move(running_[running_index]);
  running_.erase(running_.begin() + running_index);
  blocks_.Free(seq->blocks);
  FreeEncoderInput(*seq);
  seq->n_computed = 0;
  seq->draft.clear();
  ++preemptions_;
  waiting_.push_front(std::move(seq));
}

// Running sequences, oldest first, each get their pending tokens (1 when decoding) as the budget
// allows. When blocks run out, the newest running sequence is preempted, possibly the one itself.
void Scheduler::ScheduleRunning(StepPlan& plan, int& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i].get();
    const int n = ChunkTokens(*seq, budget);
    if (n == 0) {  // a prefill chunk with no allowance left this step
      ++i;
      continue;
    }
    bool preempted_self = false;
    while (!blocks_.Grow(seq->blocks, seq->n_computed + n)) {
      const size_t victim = running_.size() - 1;
      preempted_self = victim == i;
      Preempt(victim);
      if (preempted_self) break;
    }
    if (preempted_self) break;
    if (seq->n_pending() > 1) prefill_left_ -= n;
    plan.chunks.push_back({seq, n, seq->n_computed + n == static_cast<int>(seq->tokens.size())});
    plan.n_tokens += n;
    budget -= n;
    ++i;
  }
}

const std::vector<BlockKey>& Scheduler::PromptKeys(Sequence& seq) {
  if (!seq.prompt_keys_set) {
    seq.prompt_keys_set = true;
    const int bs = blocks_.block_size();
    // As the prefix cache counts them: the last prompt token is always computed.
    const int n_blocks = seq.n_prompt > 0 ? (seq.n_prompt - 1) / bs : 0;
    const std::span<const int32_t> tokens(seq.tokens);
    for (int b = 0; b < n_blocks; ++b) {
      seq.prompt_keys.push_back(BlockManager::KeyOf(b ? &seq.prompt_keys.back() : nullptr,
                                                    seq.request.cache_salt,
                                                    tokens.subspan(b * bs, bs)));
    }
  }
  return seq.prompt_keys;
}

void Scheduler::AddInFlight(Sequence& seq, std::set<BlockKey>& in_flight) {
  const std::vector<BlockKey>& keys = PromptKeys(seq);
  for (size_t b = seq.n_computed / blocks_.block_size(); b < keys.size(); ++b) {
    in_flight.insert(keys[b]);
  }
}

// Waiting sequences, first come first served: each takes its cached prefix, then blocks for its
// first chunk. The first one that does not fit stops admission (no overtaking); one that waits
// for a shared block in flight (share_in_batch) is passed over this step.
void Scheduler::AdmitWaiting(StepPlan& plan, int& budget) {
  std::set<BlockKey> in_flight;
  if (options_.share_in_batch && !waiting_.empty()) {
    for (const auto& running : running_) AddInFlight(*running, in_flight);
  }
  size_t i = 0;
  while (i < waiting_.size() && budget > 0 && prefill_left_ > 0 &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_[i].get();
    assert(seq->blocks.empty());
    const size_t n_encodes = plan.encodes.size();
    const int budget_before = budget;
    if (seq->encoder_decoder() && !AdmitEncoderInput(*seq, plan, budget)) {
      if (running_.empty() && plan.empty() && reclaim_ && reclaim_()) continue;
      return;
    }
    // Undoes AdmitEncoderInput when the decoder's part does not fit after all.
    auto undo_encode = [&] {
      if (plan.encodes.size() > n_encodes) {
        plan.encodes.pop_back();
        plan.n_tokens -= budget_before - budget;
      }
      budget = budget_before;
      FreeEncoderInput(*seq);
    };
    if (restore_) restore_(seq->tokens, seq->request.cache_salt);
    const int cached = blocks_.AllocatePrefix(seq->blocks, seq->tokens, seq->request.cache_salt);
    if (options_.share_in_batch && !in_flight.empty()) {
      const std::vector<BlockKey>& keys = PromptKeys(*seq);
      const size_t next_block = cached / blocks_.block_size();
      if (next_block < keys.size() && in_flight.count(keys[next_block])) {
        blocks_.Free(seq->blocks);
        undo_encode();
        ++i;
        continue;
      }
    }
    seq->n_computed = cached;
    const int n = ChunkTokens(*seq, budget);
    if (n == 0 || !blocks_.Grow(seq->blocks, seq->n_computed + n)) {
      blocks_.Free(seq->blocks);
      undo_encode();
      seq->n_computed = 0;
      if (running_.empty() && plan.empty() && reclaim_ && reclaim_()) continue;
      return;
    }
    if (seq->n_cached_prompt < 0) {
      // First admission: this is the request's prefix-cache lookup (an encoder input's was
      // counted by AllocateInput).
      seq->n_cached_prompt = std::min(cached, seq->n_prompt);
      blocks_.RecordQuery(seq->n_prompt, seq->n_cached_prompt);
      if (seq->encoded) seq->n_cached_prompt += static_cast<int>(seq->encoder_input.size());
    }
    if (seq->n_pending() > 1) prefill_left_ -= n;
    plan.chunks.push_back({seq, n, seq->n_computed + n == static_cast<int>(seq->tokens.size())});
    plan.n_tokens += n;
    budget -= n;
    if (options_.share_in_batch) AddInFlight(*seq, in_flight);
    running_.push_back(std::move(waiting_[i]));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// Drafts only take what plain decoding and admission left: they never preempt a sequence, hold
// back an admission, shorten a prefill chunk or evict a cached prefix block.
void Scheduler::AddDrafts(StepPlan& plan, int& budget) {
  for (ScheduledChunk& chunk : plan.chunks) {
    Sequence* seq = chunk.seq;
    if (budget <= 0 || prefill_left_ <= 0) break;
    // The chunk must reach the sequence's last token (one, or a resuming sequence's rest).
    if (seq->draft.empty() || !chunk.sample || chunk.n_tokens != seq->n_pending()) continue;
    const int n_draft = std::min({static_cast<int>(seq->draft.size()), budget, prefill_left_});
    if (!blocks_.Grow(seq->blocks, seq->n_computed + chunk.n_tokens + n_draft, /*evict=*/false))
      continue;
    chunk.n_tokens += n_draft;
    chunk.n_draft = n_draft;
    plan.n_tokens += n_draft;
    budget -= n_draft;
    prefill_left_ -= n_draft;
  }
}

int Scheduler::ChunkTokens(const Sequence& seq, int budget) const {
  const int n = std::min(seq.n_pending(), budget);
  return seq.n_pending() > 1 ? std::min(n, prefill_left_) : n;
}

int Scheduler::PrefillAllowance() const {
  const int budget = options_.max_batched_tokens;
  if (options_.max_step_ms <= 0 || !cost_.known()) return budget;
  int n_decoding = 0;
  for (const auto& seq : running_) n_decoding += seq->n_pending() == 1;
  if (n_decoding == 0) return budget;  // no stream to stall: prefill at full speed
  const int floor = std::min(budget, std::max(options_.min_prefill_tokens, blocks_.block_size()));
  double target = options_.max_step_ms;
  if (options_.max_step_decodes > 0) {
    target = std::min(target, options_.max_step_decodes * cost_.Predict(n_decoding));
  }
  const double room = std::floor((target - cost_.fixed_ms) / cost_.ms_per_token) - n_decoding;
  if (!(room > floor)) return floor;
  return room < budget ? static_cast<int>(room) : budget;
}

int Scheduler::RollbackTokens(const Sequence& seq) const {
  if (!blocks_.holds_states()) return 0;
  // Back to the boundary its computed tokens reach, then every token after it again (a resuming
  // sequence's pending ones included).
  return static_cast<int>(seq.tokens.size()) -
         blocks_.LastHeldBoundary(seq.blocks, seq.n_computed + 1);
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int budget = options_.max_batched_tokens;
  prefill_left_ = PrefillAllowance();
  ScheduleRunning(plan, budget);
  AdmitWaiting(plan, budget);
  if (!options_.recompute) AddDrafts(plan, budget);
  return plan;
}

std::vector<SequenceOutput> Scheduler::Postprocess(const StepPlan& plan,
                                                   const StepSamples& sampled) {
  std::vector<SequenceOutput> outputs;
  for (Sequence* seq : plan.encodes) {
    seq->encoded = true;
    blocks_.CommitInput(options_.cross_group, seq->input_key, seq->cross_blocks);
  }
  size_t next = 0;  // index into sampled
  for (const ScheduledChunk& chunk : plan.chunks) {
    Sequence* seq = chunk.seq;
    if (!chunk.sample) {
      seq->n_computed += chunk.n_tokens;
      blocks_.Commit(seq->blocks, seq->tokens, seq->n_computed, seq->request.cache_salt);
      if (!options_.recompute) blocks_.SlideWindows(seq->blocks, seq->n_computed);
      continue;
    }
    assert(next < sampled.size());
    const std::vector<SampleResult>& samples = sampled[next++];
    seq->resuming = false;
    assert(!samples.empty() && static_cast<int>(samples.size()) <= chunk.n_draft + 1);
    // Fed tokens before the drafts are computed; so is each draft that the next sample confirms.
    seq->n_computed += chunk.n_tokens - chunk.n_draft;
    int n_accepted = 0;
    for (size_t j = 0; j < samples.size(); ++j) {
      const SampleResult& sample = samples[j];
      if (j > 0) {
        ++seq->n_computed;  // draft j - 1 was sample j - 1: its K/V are verified
        ++n_accepted;
      }
      SequenceOutput out{.seq = seq, .sample = sample};
      out.outcome =
          seq->stop.Push(sample.token, seq->n_generated(), static_cast<int>(seq->tokens.size()));
      if (out.outcome.append) seq->tokens.push_back(sample.token);
      const bool finished = out.outcome.finish != FinishReason::kNone;
      outputs.push_back(std::move(out));
      if (finished) break;
    }
    if (chunk.n_draft > 0) {
      ++spec_drafts_;
      spec_draft_tokens_ += chunk.n_draft;
      spec_accepted_tokens_ += n_accepted;
      if (spec_accepted_by_pos_.size() < static_cast<size_t>(chunk.n_draft))
        spec_accepted_by_pos_.resize(chunk.n_draft);
      for (int j = 0; j < n_accepted; ++j) ++spec_accepted_by_pos_[j];
      seq->n_drafted += chunk.n_draft;
      seq->n_accepted += n_accepted;
      // The rejected drafts' slots: only blocks for the tokens the sequence holds stay.
      blocks_.Truncate(seq->blocks, static_cast<int>(seq->tokens.size()));
      // A recurrent state ran over the rejected drafts: go back to the last block boundary,
      // whose checkpoint holds accepted tokens only, and compute the rest again with the next
      // step's tokens (docs/kv-cache.md, "Recurrent state").
      if (n_accepted < chunk.n_draft && blocks_.holds_states()) {
        seq->n_computed = blocks_.LastHeldBoundary(seq->blocks, seq->n_computed);
        blocks_.Truncate(seq->blocks, seq->n_computed);
        seq->resuming = true;
      }
    }
    seq->draft.clear();
    blocks_.Commit(seq->blocks, seq->tokens, seq->n_computed, seq->request.cache_salt);
    // Window groups give back what no later query reads (the no-cache baseline rewrites every
    // position, so it keeps its blocks).
    if (options_.recompute) {
      seq->n_computed = 0;
    } else {
      blocks_.SlideWindows(seq->blocks, seq->n_computed);
    }
  }
  assert(next == sampled.size());
  return outputs;
}

std::unique_ptr<Sequence> Scheduler::Remove(Sequence* seq) {
  std::unique_ptr<Sequence> out;
  auto in_running =
      std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s.get() == seq; });
  if (in_running != running_.end()) {
    out = std::move(*in_running);
    running_.erase(in_running);
  } else {
    auto in_waiting = std::find_if(waiting_.begin(), waiting_.end(),
                                   [&](const auto& s) { return s.get() == seq; });
    assert(in_waiting != waiting_.end());
    out = std::move(*in_waiting);
    waiting_.erase(in_waiting);
  }
  blocks_.Free(out->blocks);
  FreeEncoderInput(*out);
  return out;
}

bool Scheduler::AdmitEncoderInput(Sequence& seq, StepPlan& plan, int& budget) {
  const int n_input = static_cast<int>(seq.encoder_input.size());
  // The encoder runs over the whole input in one step: within the budget (leaving the decoder's
  // first token), or alone.
  if (n_input >= budget && !(plan.empty() && plan.encodes.empty())) return false;
  const int bs = blocks_.block_size();
  const int n_blocks = (n_input + bs - 1) / bs;
  if (input_restore_) input_restore_(seq.input_key, n_blocks, n_input);
  bool hit = false;
  if (!blocks_.AllocateInput(options_.cross_group, seq.input_key, n_blocks, n_input,
                             seq.cross_blocks, &hit)) {
    return false;
  }
  seq.encoded = hit;
  if (!hit) {
    plan.encodes.push_back(&seq);
    plan.n_tokens += n_input;
    budget -= std::min(budget - 1, n_input);
  }
  return true;
}

void Scheduler::FreeEncoderInput(Sequence& seq) {
  if (seq.cross_blocks.empty()) return;
  blocks_.FreeInput(options_.cross_group, seq.cross_blocks);
  seq.encoded = false;
}

}  // namespace kvserve
