#include "engine/engine_stats.h"

#include <algorithm>

namespace kvserve {

void StepCounters::CountStep(const StepPlan& plan) {
  ++steps;
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Sequence& seq = *chunk.seq;
    // Prompt tokens at the front of seq.tokens: the kept prompt until the first token is
    // generated; after a shift during generation the recompute counts as shift_recomputed_tokens.
    const int n_prompt = seq.n_dropped() == 0     ? seq.n_prompt
                         : seq.n_generated() == 0 ? static_cast<int>(seq.tokens.size())
                                                  : 0;
    if (seq.n_computed < n_prompt) {
      prompt_tokens += std::min(seq.n_computed + chunk.n_tokens, n_prompt) - seq.n_computed;
    }
  }
}

void StepCounters::CountShift(bool first, bool generating, const ContextShiftResult& shift) {
  if (first) ++shifted_requests;
  ++context_shifts;
  shift_dropped_tokens += static_cast<uint64_t>(shift.n_dropped);
  // The pending token would have been computed by a plain decode step anyway.
  if (generating && shift.n_recompute > 1) shift_recomputed_tokens += shift.n_recompute - 1;
}

void StepCounters::AddTo(EngineStats& stats) const {
  stats.steps = steps;
  stats.prompt_tokens = prompt_tokens;
  stats.generation_tokens = generation_tokens;
  stats.shifted_requests = shifted_requests;
  stats.shift_dropped_tokens = shift_dropped_tokens;
  stats.context_shifts = context_shifts;
  stats.shift_recomputed_tokens = shift_recomputed_tokens;
  stats.kv_disk_restored_tokens = disk_restored_tokens;
  stats.grammar_masked = grammar.masked;
  stats.grammar_checked = grammar.checked;
  stats.grammar_mask_ms = grammar.mask_ms;
}

void AddPoolStats(const BlockManager& blocks, const KvCache& kv, EngineStats& stats) {
  const BlockManagerStats b = blocks.Stats();
  stats.blocks_total = b.total;
  stats.blocks_used = b.used;
  stats.blocks_cached = b.cached;
  stats.blocks_free = b.free;
  stats.prefix_queries_tokens = b.prefix_queries_tokens;
  stats.prefix_hits_tokens = b.prefix_hits_tokens;
  stats.kv_bytes = kv.bytes();
  stats.group_blocks_total.clear();
  stats.group_blocks_used.clear();
  for (int g = 0; g < blocks.n_groups(); ++g) {
    const BlockManagerStats group = blocks.Stats(g);
    stats.group_blocks_total.push_back(group.total);
    stats.group_blocks_used.push_back(group.used);
  }
}

void AddSchedulerStats(const Scheduler& scheduler, EngineStats& stats) {
  stats.running = static_cast<int>(scheduler.running().size());
  stats.waiting = static_cast<int>(scheduler.waiting().size());
  stats.preemptions = scheduler.preemptions();
  stats.spec_drafts = scheduler.spec_drafts();
  stats.spec_draft_tokens = scheduler.spec_draft_tokens();
  stats.spec_accepted_tokens = scheduler.spec_accepted_tokens();
  stats.spec_accepted_by_position = scheduler.spec_accepted_by_position();
}

void AddDiskStats(const DiskTierStats& disk, EngineStats& stats) {
  stats.kv_disk = true;
  stats.kv_disk_hits = disk.hits;
  stats.kv_disk_misses = disk.misses;
  stats.kv_disk_read_bytes = disk.read_bytes;
  stats.kv_disk_writes = disk.writes;
  stats.kv_disk_write_bytes = disk.write_bytes;
  stats.kv_disk_write_failures = disk.write_failures;
  stats.kv_disk_rejected = disk.rejected;
  stats.kv_disk_bytes_used = disk.bytes_used;
}

}  // namespace kvserve
