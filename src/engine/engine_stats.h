// How EngineStats is filled: the counters only the step keeps (StepCounters), and one function
// per part that keeps its own (the block pools and the KV memory, the scheduler, the disk tier).
// EngineCore::FillStats calls them in turn on the engine thread.
#pragma once

#include <cstdint>

#include "engine/context_shift.h"
#include "engine/engine.h"
#include "engine/grammar_sampling.h"
#include "engine/scheduler.h"
#include "kv/block_manager.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"

namespace kvserve {

struct StepCounters {
  uint64_t steps = 0;
  uint64_t prompt_tokens = 0;      // prompt tokens computed (not served from a cache)
  uint64_t generation_tokens = 0;  // tokens sampled
  uint64_t shifted_requests = 0;
  uint64_t shift_dropped_tokens = 0;
  uint64_t context_shifts = 0;
  uint64_t shift_recomputed_tokens = 0;
  uint64_t disk_restored_tokens = 0;  // prompt tokens whose blocks came back from the disk tier
  GrammarSampleCost grammar;          // constrained decoding's masks

  // One step of `plan` and the prompt tokens it computes.
  void CountStep(const StepPlan& plan);
  // A cut of a sequence: `first` when it is the sequence's first, `generating` once it has
  // generated (its recompute past the pending token is then counted).
  void CountShift(bool first, bool generating, const ContextShiftResult& shift);
  void AddTo(EngineStats& stats) const;
};

// Blocks over all groups and per group, the KV bytes, and prefix lookups.
void AddPoolStats(const BlockManager& blocks, const KvCache& kv, EngineStats& stats);
// Running and waiting sequences, preemptions and speculation's verifies.
void AddSchedulerStats(const Scheduler& scheduler, EngineStats& stats);
// The disk tier's reads and writes (sets stats.kv_disk).
void AddDiskStats(const DiskTierStats& disk, EngineStats& stats);

}  // namespace kvserve
