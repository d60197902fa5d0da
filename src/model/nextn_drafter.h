// A model's own multi-token-prediction layers ("nextn", MTP: Qwen3.5's one layer past the main
// stack) as a drafter: each drafting step takes, per sequence, a token at a position and the
// hidden row that chose it (the target's final hidden row, after its output norm, for the first
// step; the drafter's own next hidden row after that), and gives the next token's logits and the
// hidden row the next step reads. Its attention has a cache layer of its own in the model's KV
// cache, which the model's Forward fills for every token it computes (the "catch-up"), so the
// prefix cache, sessions and preemption keep it with the rest. Immutable, as every Model.
#pragma once

#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"

namespace kvserve {

class NextnDrafter {
 public:
  virtual ~NextnDrafter() = default;

  // The hidden width the steps read and write (the model's n_embd).
  virtual int hidden_width() const = 0;

  // One drafting step of n rows: batch.tokens (the token each row reads), batch.positions (its
  // position: the cache holds the sequence's positions before it, the caller's earlier steps
  // included), batch.seq_index, batch.kv_groups (every group's block tables, and the slots of
  // each row in every group: the step stores the row's K/V in the drafter's cache layer, which
  // the target's next forward overwrites) and batch.logit_rows = every row.
  // hidden: [n, hidden_width()]. Writes logits [n, n_vocab] and hidden_next [n, hidden_width()].
  virtual void Draft(const ForwardBatch& batch, const float* hidden, KvCache& kv, Workspace& ws,
                     float* logits, float* hidden_next) const = 0;
};

}  // namespace kvserve
