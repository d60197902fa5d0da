// Blocks that decoder architectures share, built from Backend operations: token (and learned
// position) embedding, paged self-attention over the KV cache, and the final norm + output
// projection of the rows that need logits. An architecture's file composes these with its own
// norms, projections and feed-forward.
#pragma once

#include <functional>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/forward_batch.h"

namespace kvserve {

// Workspace buffer ids of a decoder's forward pass.
enum DecoderBuffer : int { kX, kXn, kQ, kK, kV, kAttn, kProj, kGate, kUp, kQkv, kTmp, kLogitsIn };

// x = rows of `token_embd` for the batch's tokens.  x: [n_tokens, n_embd]
void EmbedTokens(const Backend& backend, const ForwardBatch& batch, const WeightMatrix& token_embd,
                 float* x, Workspace& ws);

// Stores each token's K and V rows (n_kv_heads * head_dim floats, `kv_stride` floats apart) at its
// slot, then attn = causal softmax(q · Kᵀ / sqrt(head_dim)) · V per head, over the sequence's keys
// in the cache (this batch's included).  q, attn: [n_tokens, n_heads * head_dim]
void SelfAttention(const Backend& backend, const ForwardBatch& batch, const KvLayerView& kv,
                   const float* q, const float* k, const float* v, size_t kv_stride, int n_heads,
                   float* attn, Workspace& ws);

// logits = output · norm(x row) for each of batch.logit_rows; `norm(in, n_rows, out)` is the
// architecture's final norm.  x: [n_tokens, n_embd]; logits: [logit_rows.size(), n_vocab]
using RowNorm = std::function<void(const float* in, int n_rows, float* out)>;
void ProjectLogits(const Backend& backend, const ForwardBatch& batch, const float* x, int n_embd,
                   const RowNorm& norm, const WeightMatrix& output, float* logits, Workspace& ws);

}  // namespace kvserve
