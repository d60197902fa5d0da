#include "model/decoder_blocks.h"

#include <cmath>

namespace kvserve {

void EmbedTokens(const Backend& backend, const ForwardBatch& batch, const WeightMatrix& token_embd,
                 float* x, Workspace& ws) {
  backend.GetRows(token_embd, batch.tokens, x, ws);
}

void SelfAttention(const Backend& backend, const ForwardBatch& batch, const KvLayerView& kv,
                   const float* q, const float* k, const float* v, size_t kv_stride, int n_heads,
                   float* attn, Workspace& ws) {
  backend.StoreKv(kv, batch.slots, k, v, kv_stride, ws);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  backend.PagedAttention(kv, batch.attention(), q, n_heads, scale, attn, ws);
}

void ProjectLogits(const Backend& backend, const ForwardBatch& batch, const float* x, int n_embd,
                   const RowNorm& norm, const WeightMatrix& output, float* logits, Workspace& ws) {
  const int n_out = static_cast<int>(batch.logit_rows.size());
  if (n_out == 0) return;
  float* rows = ws.Floats(kTmp, static_cast<size_t>(n_out) * n_embd);
  float* normed = ws.Floats(kLogitsIn, static_cast<size_t>(n_out) * n_embd);
  backend.GatherRows(x, n_embd, batch.logit_rows, n_embd, rows);
  norm(rows, n_out, normed);
  backend.Matmul(output, normed, n_out, logits, ws);
}

}  // namespace kvserve
