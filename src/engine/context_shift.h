// Context overflow by shifting (ContextOverflow::kShift): when a sequence holds more tokens than
// the context, its first n_head tokens (the attention sinks and a pinned prefix, rounded up to
// whole KV blocks) stay where they are, a run of whole blocks after them is dropped, and the
// tokens after that move down to follow the head. The head's blocks are kept (same tokens, same
// positions, same K/V); the blocks after it are released and the kept tail is recomputed at its new
// positions, like a preempted sequence's recompute, so what follows equals a fresh computation
// over the kept tokens (exact by construction; no re-rotation of cached keys). Blocks the prefix
// cache already holds for the kept tokens' chain are taken instead of recomputed. See
// docs/kv-cache.md, "Context overflow".
//
//   if (seq.shift && seq.tokens.size() > n_ctx)
//     ApplyContextShift(seq, PlanContextShift(seq.tokens.size(), n_ctx, seq.n_head, bs), blocks);
#pragma once

#include <string>

#include "engine/sequence.h"
#include "kv/block_manager.h"
#include "util/status.h"

namespace kvserve {

// One cut: tokens [head, head + n_drop) go, the rest stays in order.
struct ContextShift {
  int head = 0;
  int n_drop = 0;
};

// The head a shifting sequence keeps: max(sink_tokens, pinned_prefix_tokens) rounded up to whole
// blocks of block_size.
int ContextShiftHead(int sink_tokens, int pinned_prefix_tokens, int block_size);

// Whether a head of n_head tokens leaves room to shift in a context of n_ctx: the head plus two
// blocks must fit (so that whole blocks can be dropped and at least one token kept after them).
// The error names the numbers.
Status CheckContextShiftHead(int n_head, int n_ctx, int block_size);

// The cut for a sequence of n_tokens > n_ctx tokens whose head is n_head tokens (checked by
// CheckContextShiftHead): it keeps about half of the context after the head, t = (n_ctx - n_head)
// / 2 tokens, and drops the smallest whole number of blocks that leaves at most t; so shifts come
// once per about t generated tokens and the kept tokens fit with room to generate.
ContextShift PlanContextShift(int n_tokens, int n_ctx, int n_head, int block_size);

// What ApplyContextShift did.
struct ContextShiftResult {
  int n_dropped = 0;     // tokens removed
  int n_recompute = 0;   // kept tokens whose K/V must be computed again (in the coming steps)
  int n_from_cache = 0;  // kept tokens after the head found in the prefix cache instead
};

// Cuts `seq`: moves the dropped tokens to seq.dropped, keeps the head's blocks and releases the
// rest of its table (BlockManager::Truncate), then takes the prefix-cache blocks that continue
// the head's chain over the kept tokens (BlockManager::ExtendPrefix); seq.n_computed becomes the
// tokens its table holds. Its in-batch prefix keys are dropped (they named the old prompt).
// Works on a running sequence (blocks) and on one not yet admitted (no blocks).
ContextShiftResult ApplyContextShift(Sequence& seq, const ContextShift& shift,
                                     BlockManager& blocks);

}  // namespace kvserve
