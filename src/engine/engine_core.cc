#include "engine/engine_core.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "engine/block_map.h"
#include "engine/context_shift.h"
#include "engine/engine_stats.h"
#include "engine/grammar_sampling.h"
#include "engine/kv_disk_setup.h"

namespace kvserve {

namespace {

// Each group's pool: its blocks and its cache kind.
std::vector<BlockPoolSpec> PoolSpecs(const KvSpec& spec, const std::vector<int>& n_blocks) {
  std::vector<BlockPoolSpec> pools;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    pools.push_back({.n_blocks = n_blocks[g], .kind = spec.groups[g].kind});
  }
  return pools;
}

}  // namespace

EngineCore::EngineCore(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options,
                       std::vector<int> n_blocks, int n_draft_blocks,
                       std::function<void(std::vector<std::string>)> on_sessions_changed)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      kv_(model.kv_spec(), options.kv_type, options.block_size, n_blocks,
          model.backend().allocator()),
      runner_(model, kv_, options.n_threads),
      blocks_(PoolSpecs(model.kv_spec(), n_blocks), options.block_size, options.prefix_caching),
      sessions_(blocks_, options.session_ttl_s, options.max_pinned_fraction,
                std::move(on_sessions_changed)),
      scheduler_(blocks_,
                 SchedulerOptions{.max_num_seqs = options.max_num_seqs,
                                  .max_batched_tokens = options.max_batched_tokens,
                                  .recompute = options.recompute,
                                  .share_in_batch = options.prefix_caching,
                                  .max_step_ms = options.max_step_ms,
                                  .max_step_decodes = options.max_step_decodes,
                                  .cross_group = model.cross_group()},
                 [this] { return sessions_.ReleaseOldest(); }),
      drafts_(options, n_draft_blocks, model, kv_) {
  runner_.KeepFinalHidden(drafts_.wants_target_hidden());
  if (drafts_.enabled()) {
    blocks_.AddEvictionHook([this](int group, int32_t, const BlockKey& key) {
      if (group == 0) drafts_.BlockEvicted(key);
    });
  }
  if (!options_.kv_disk_dir.empty()) OpenDiskTier();
}

EngineCore::~EngineCore() {
  if (spill_) spill_->Flush();
}

void EngineCore::OpenDiskTier() {
  auto tier = OpenEngineDiskTier(options_, model_);
  if (!tier.ok()) {
    std::fprintf(stderr, "kvserve: warning: KV disk tier off: %s (prompts are recomputed)\n",
                 tier.message().c_str());
    return;
  }
  disk_ = std::move(tier).value();
  if (!disk_->writable()) {
    std::fprintf(stderr,
                 "kvserve: warning: KV disk directory '%s' is not writable (%s): its blocks are "
                 "read back, none are written\n",
                 disk_->dir().c_str(), disk_->read_only_reason().c_str());
  }
  spill_ = std::make_unique<KvDiskSpill>(blocks_, kv_, *disk_);
  scheduler_.SetPrefixRestore([this](std::span<const int32_t> tokens, const std::string& salt) {
    const int restored = spill_->Restore(tokens, salt);
    counters_.disk_restored_tokens += static_cast<uint64_t>(restored) * blocks_.block_size();
  });
  // An encoder-decoder's inputs: their cross-attention blocks, the whole input or nothing.
  if (model_.cross_group() < 0) return;
  scheduler_.SetInputRestore([this](const BlockKey& input_key, int n_blocks, int n_tokens) {
    if (spill_->RestoreInput(model_.cross_group(), input_key, n_blocks)) {
      counters_.disk_restored_tokens += static_cast<uint64_t>(n_tokens);
    }
  });
}

void EngineCore::Add(Request request, std::shared_ptr<RequestStream> stream) {
  // Engine::Submit resolved the policy; a shifting sequence has no context stop.
  const bool shift = request.context_overflow == ContextOverflow::kShift;
  auto seq = std::make_unique<Sequence>(std::move(request), std::move(stream), tokenizer_,
                                        model_.config().n_vocab, shift ? INT_MAX : options_.n_ctx);
  if (model_.cross_group() >= 0) StartDecoder(*seq);
  if (shift) {
    seq->shift = true;
    seq->n_head = ContextShiftHead(options_.sink_tokens,
                                   std::min(seq->request.pinned_prefix_tokens, seq->n_prompt),
                                   options_.block_size);
    ShiftIfOverflowing(*seq);  // a prompt longer than the context: head + latest tokens
  }
  if (seq->request.timeout_s > 0) {
    seq->deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(seq->request.timeout_s));
  }
  Sequence* added = seq.get();
  scheduler_.Add(std::move(seq));
  // Nothing to generate: the answer is empty and complete (the step always samples a token).
  if (added->request.max_tokens == 0) Finish(added, FinishReason::kLength);
}

// An encoder-decoder model's sequence: the prompt goes to the encoder, the decoder starts from the
// model's start token and the request's decoder prompt. The decoder's K/V depend on the input too
// (through cross-attention), so its prefix keys are salted with the input's key: a decoder prefix
// is shared only under the same input (and the request's own salt, which the input's key already
// holds).
void EngineCore::StartDecoder(Sequence& seq) {
  seq.encoder_input = std::move(seq.tokens);
  seq.tokens = {model_.decoder_start_token()};
  seq.tokens.insert(seq.tokens.end(), seq.request.decoder_prompt.begin(),
                    seq.request.decoder_prompt.end());
  seq.n_prompt = static_cast<int>(seq.tokens.size());
  seq.input_key = BlockManager::InputKey(seq.encoder_input, seq.request.cache_salt);
  seq.request.cache_salt = "encoder input " + Sha256::Hex(seq.input_key);
}

void EngineCore::Finish(Sequence* seq, FinishReason reason, const std::string& tail,
                        const std::string& stop_string) {
  RequestEvent event;
  event.kind = RequestEvent::Kind::kFinish;
  event.finish_reason = reason;
  event.text = tail;
  event.stop_string = stop_string;
  event.usage.prompt_tokens = seq->n_prompt_tokens();
  event.usage.completion_tokens = seq->n_generated();
  event.usage.cached_tokens = std::max(0, seq->n_cached_prompt);
  event.usage.drafted_tokens = seq->n_drafted;
  event.usage.accepted_tokens = seq->n_accepted;
  event.usage.dropped_tokens = seq->n_dropped();
  event.usage.context_shifts = seq->n_shifts;
  drafts_.Forget(*seq);
  const bool completed = reason == FinishReason::kStop || reason == FinishReason::kLength;
  if (!seq->request.session_id.empty() && completed) {
    sessions_.Pin(seq->request.session_id, seq->blocks);
  }
  std::unique_ptr<Sequence> owned = scheduler_.Remove(seq);
  finished_ids_.push_back(owned->request.id);
  owned->stream->Push(std::move(event));
}

void EngineCore::Abort(const std::string& id) {
  auto find = [&](const auto& list) -> Sequence* {
    for (const auto& seq : list) {
      if (seq->request.id == id) return seq.get();
    }
    return nullptr;
  };
  Sequence* seq = find(scheduler_.running());
  if (seq == nullptr) seq = find(scheduler_.waiting());
  if (seq != nullptr) Finish(seq, FinishReason::kAbort);
}

void EngineCore::AbortAll(FinishReason reason) {
  while (!scheduler_.running().empty()) Finish(scheduler_.running().front().get(), reason);
  while (!scheduler_.waiting().empty()) Finish(scheduler_.waiting().front().get(), reason);
}

void EngineCore::Expire(std::chrono::steady_clock::time_point now) {
  std::vector<Sequence*> late;
  for (const auto& seq : scheduler_.running()) {
    if (seq->deadline <= now) late.push_back(seq.get());
  }
  for (const auto& seq : scheduler_.waiting()) {
    if (seq->deadline <= now) late.push_back(seq.get());
  }
  for (Sequence* seq : late) Finish(seq, FinishReason::kTimeout);
  sessions_.ReleaseExpired(now);
}

bool EngineCore::ReleaseSession(const std::string& session_id) {
  return sessions_.Release(session_id);
}

void EngineCore::ShiftIfOverflowing(Sequence& seq) {
  if (!seq.shift || static_cast<int>(seq.tokens.size()) <= options_.n_ctx) return;
  const bool first = seq.n_dropped() == 0;
  const bool generating = seq.n_generated() > 0;
  const ContextShiftResult r =
      ApplyContextShift(seq,
                        PlanContextShift(static_cast<int>(seq.tokens.size()), options_.n_ctx,
                                         seq.n_head, options_.block_size),
                        blocks_);
  counters_.CountShift(first, generating, r);
}

bool EngineCore::Step() {
  Prepare();
  StepPlan plan = scheduler_.Schedule();
  if (plan.empty()) return false;
  drafts_.Fill(plan);
  const auto start = std::chrono::steady_clock::now();
  const StepLogits logits = Run(plan);
  const StepSamples sampled = Sample(plan, logits);
  ObserveStepTime(plan, start);
  Deliver(scheduler_.Postprocess(plan, sampled));
  return true;
}

void EngineCore::Prepare() {
  // A token sampled into the last position of the context: shift before the next forward.
  for (const auto& seq : scheduler_.running()) ShiftIfOverflowing(*seq);
  drafts_.Plan(scheduler_);
}

StepLogits EngineCore::Run(const StepPlan& plan) {
  counters_.CountStep(plan);
  StepLogits logits = runner_.Run(plan);
  if (step_observer_) step_observer_(plan, logits);
  return logits;
}

void EngineCore::ObserveStepTime(const StepPlan& plan,
                                 std::chrono::steady_clock::time_point start) {
  const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  if (drafts_.enabled()) ObserveDraftingStep(plan, ms.count());
  if (options_.max_step_ms <= 0) return;
  step_cost_.Observe(plan.n_tokens, ms.count());
  scheduler_.SetStepCost(step_cost_.cost());
}

// A decode step (every chunk one token and its drafts) teaches the gate the step's cost; one in
// which hybrid sequences sent back to a checkpoint recompute tokens before theirs, what those
// cost; a step with a prompt chunk neither.
void EngineCore::ObserveDraftingStep(const StepPlan& plan, double ms) {
  int n_decode = 0, n_recomputed = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    const int extra = c.n_tokens - c.n_draft - 1;
    if (!c.sample || (extra > 0 && !c.seq->resuming)) return;
    n_decode += c.n_draft + 1;
    n_recomputed += extra;
  }
  drafts_.ObserveDecodeStep(n_decode, n_recomputed, ms);
}

StepSamples EngineCore::Sample(const StepPlan& plan, const StepLogits& logits) {
  StepSamples sampled;
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.sample) continue;
    Sequence& seq = *chunk.seq;
    std::vector<SampleResult>& samples = sampled.emplace_back();
    // Position by position, as plain decoding would: the history grows by each accepted token.
    const size_t n_tokens = seq.tokens.size();
    int n_accepted = 0;
    for (;;) {
      samples.push_back(SampleNext(seq, logits.row(row + n_accepted), counters_.grammar));
      if (n_accepted >= chunk.n_draft || samples.back().token != seq.draft[n_accepted]) break;
      seq.tokens.push_back(samples.back().token);
      ++n_accepted;
    }
    seq.tokens.resize(n_tokens);
    if (!logits.hidden.empty()) {
      const std::span<const float> h = logits.hidden_row(row + n_accepted);
      seq.target_hidden.assign(h.begin(), h.end());
    }
    row += chunk.n_draft + 1;
    drafts_.Observe(seq, chunk.n_draft, n_accepted);
  }
  return sampled;
}

void EngineCore::Deliver(const std::vector<SequenceOutput>& outputs) {
  counters_.generation_tokens += outputs.size();
  for (const SequenceOutput& out : outputs) {
    Sequence* seq = out.seq;
    if (out.outcome.append) {
      RequestEvent event;
      event.token = out.sample.token;
      event.text = out.outcome.text;
      if (seq->request.logprobs) {
        event.logprob = out.sample.logprob;
        event.top_logprobs = out.sample.top;
      }
      seq->stream->Push(std::move(event));
    }
    if (out.outcome.finish != FinishReason::kNone)
      Finish(seq, out.outcome.finish, out.outcome.tail, out.outcome.stop_string);
  }
}

std::vector<std::string> EngineCore::TakeFinishedIds() {
  std::vector<std::string> out;
  out.swap(finished_ids_);
  return out;
}

std::vector<std::string> EngineCore::SessionIds() const { return sessions_.Ids(); }

void EngineCore::FillStats(EngineStats& stats) const {
  AddSchedulerStats(scheduler_, stats);
  AddPoolStats(blocks_, kv_, stats);
  stats.sessions = sessions_.size();
  counters_.AddTo(stats);
  if (disk_) AddDiskStats(disk_->Stats(), stats);
}

void EngineCore::FillBlockMap(BlockMap& map) const {
  map.block_size = blocks_.block_size();
  map.blocks = blocks_.Snapshot();
  for (const auto& seq : scheduler_.running()) {
    map.AddOwner(BlockOwner{.kind = BlockOwner::Kind::kRequest,
                            .id = seq->request.id,
                            .session_id = seq->request.session_id,
                            .cache_salt = seq->request.cache_salt,
                            .n_tokens = seq->n_computed},
                 seq->blocks);
  }
  for (const auto& [id, session] : sessions_.sessions()) {
    map.AddOwner(BlockOwner{.kind = BlockOwner::Kind::kSession,
                            .id = id,
                            .session_id = id,
                            .n_tokens = session.pinned.n_logical() * blocks_.block_size()},
                 session.pinned);
  }
}

}  // namespace kvserve
