// A draft model that keeps no cache of its own and drafts from the target's state: Gemma 4's
// assistant (`gemma4-assistant`). Each drafting step takes, per sequence, a token, the target's
// final hidden row (after its output norm) and a query position, attends to the target's KV
// cache, and gives the next token's logits and the hidden row the step after it reads in place
// of the target's. Immutable after load, as every Model.
#pragma once

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "util/status.h"

namespace kvserve {

class Model;

// What the drafter reads of one target, resolved once (HiddenStateDrafter::Bind).
struct DraftTarget {
  const WeightMatrix* token_embd = nullptr;  // the target's, [n_vocab, n_embd of the target]
  int n_embd = 0;                            // the target's hidden width
  int window_layer = -1;  // the target layer holding the cache the drafter's windowed layers read
  int global_layer = -1;  // ... and its global layers read
};

class HiddenStateDrafter {
 public:
  virtual ~HiddenStateDrafter() = default;

  // Whether it drafts for `target` (its hidden width, vocabulary, head shapes and the two caches
  // it reads), and what it reads; the error names the field and both values.
  virtual Result<DraftTarget> Bind(const Model& target) const = 0;

  // One drafting step of n rows: batch.tokens, batch.positions (the query's position: `kv`, the
  // target's cache, holds the sequence's positions before it, and the row reads those alone),
  // batch.seq_index and batch.kv_groups (the target's groups' block tables; nothing is stored)
  // and batch.logit_rows = every row. hidden: [n, target.n_embd]. Writes logits [n, n_vocab] and
  // hidden_next [n, target.n_embd].
  virtual void Draft(const DraftTarget& target, const ForwardBatch& batch, const float* hidden,
                     KvCache& kv, Workspace& ws, float* logits, float* hidden_next) const = 0;
};

}  // namespace kvserve
