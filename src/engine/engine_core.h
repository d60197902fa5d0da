// The state the engine thread owns: KV cache, block manager, scheduler, model runner, sessions,
// and the step: schedule, run, sample, postprocess. Not thread-safe: only the
// engine thread calls it (Engine wraps it with a queue).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/draft_planner.h"
#include "engine/engine.h"
#include "engine/engine_stats.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "engine/session_table.h"
#include "engine/step_cost.h"
#include "kv/block_manager.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"
#include "kv/kv_disk_spill.h"

namespace kvserve {

class EngineCore {
 public:
  // on_sessions_changed is called (on the engine thread) with the live session ids whenever a
  // session is pinned or released, before the request that pinned it reports its finish.
  // n_blocks: the KV pool of each layer group (the model's KvSpec::groups order); n_draft_blocks:
  // the draft model's KV pool (options.spec.method kDraft).
  EngineCore(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options,
             std::vector<int> n_blocks, int n_draft_blocks,
             std::function<void(std::vector<std::string>)> on_sessions_changed);
  // With a disk tier: writes the prefix blocks still in memory to it (they survive a restart).
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  void Add(Request request, std::shared_ptr<RequestStream> stream);
  void Abort(const std::string& id);
  bool ReleaseSession(const std::string& session_id);
  // Finishes requests past their deadline and releases expired sessions.
  void Expire(std::chrono::steady_clock::time_point now);
  // One scheduler step; false when there was nothing to run.
  bool Step();
  // Aborts every live request.
  void AbortAll(FinishReason reason);

  // Ids of requests finished since the last call.
  std::vector<std::string> TakeFinishedIds();
  std::vector<std::string> SessionIds() const;
  void FillStats(EngineStats& stats) const;
  // Every block's state and owners (running requests, then pinned sessions); not map.stats.
  void FillBlockMap(BlockMap& map) const;

  // For tests and tools: called after each step's forward with its plan and logits (before
  // sampling); the running and waiting sequences; every block pool's invariants.
  void SetStepObserver(std::function<void(const StepPlan&, const StepLogits&)> observer) {
    step_observer_ = std::move(observer);
  }
  const Scheduler& scheduler() const { return scheduler_; }
  Status CheckBlockInvariants() const { return blocks_.CheckInvariants(); }

 private:
  // `stop_string`: the stop string that ended it, if one did (RequestEvent::stop_string).
  // An encoder-decoder model's new sequence: its prompt becomes the encoder's input.
  void StartDecoder(Sequence& seq);
  void Finish(Sequence* seq, FinishReason reason, const std::string& tail = "",
              const std::string& stop_string = "");
  // ContextOverflow::kShift: cuts a sequence that holds more tokens than the context
  // (engine/context_shift.h) and counts it; nothing for the others.
  void ShiftIfOverflowing(Sequence& seq);
  // Per chunk that samples, in plan order, from its own sequence's sampler: one token, or for a
  // chunk with drafts the replay (while the sampled token equals the draft, the next row); the
  // one place that decides which drafts are accepted. Moves each sequence's draft depth on.
  StepSamples Sample(const StepPlan& plan, const StepLogits& logits);
  // The forward pass of a plan: counts its prompt tokens, runs it, tells the step observer.
  StepLogits Run(const StepPlan& plan);
  // Under max_step_ms, feeds the time since `start` (forward and sampling) to the step-cost model
  // the scheduler sizes steps by.
  void ObserveStepTime(const StepPlan& plan, std::chrono::steady_clock::time_point start);
  // What a step of `ms` milliseconds teaches speculation's cost gate (DraftPlanner).
  void ObserveDraftingStep(const StepPlan& plan, double ms);
  // Before a step is scheduled: shifts the sequences whose context is full, then plans drafts.
  void Prepare();
  // Sends each output's token event and finishes the sequences whose stop rules said so.
  void Deliver(const std::vector<SequenceOutput>& outputs);
  // Opens options_.kv_disk_dir (a warning and no disk tier when it cannot be used).
  void OpenDiskTier();

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  KvCache kv_;
  ModelRunner runner_;
  BlockManager blocks_;
  SessionTable sessions_;  // borrows blocks_
  Scheduler scheduler_;
  DraftPlanner drafts_;
  StepCostModel step_cost_;  // fitted from timed steps when options_.max_step_ms > 0
  std::vector<std::string> finished_ids_;
  std::function<void(const StepPlan&, const StepLogits&)> step_observer_;
  StepCounters counters_;
  // The disk tier (null without one); spill_ borrows kv_, blocks_ and disk_.
  std::unique_ptr<DiskTier> disk_;
  std::unique_ptr<KvDiskSpill> spill_;
};

}  // namespace kvserve
