// The gated full-attention sublayer of Qwen3.5 (dense and MoE), as one self-loading block, as
// llama.cpp's qwen35 and qwen35moe graphs compute it: attn_q gives per head q then an output gate
// (2 * head_dim rows per head); q and k RMSNorm per head (attn_q_norm, attn_k_norm, as stored);
// RoPE as the call gives it (Qwen3.5: the first rope_dims of each head on split halves); paged
// self-attention with scores times 1/sqrt(head_dim); the output times sigmoid(gate), then
// attn_output. The norm before it and the residual after it are the layer's own.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/forward_batch.h"
#include "model/gated_delta_net_block.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

// Workspace buffer ids of the block, past the delta net's (a Qwen3.5 stack has both); an
// architecture using it starts its own at kGatedAttentionBufferEnd.
enum GatedAttentionBuffer : int {
  kQueryGate = kDeltaNetBufferEnd,  // [n_tokens, n_heads * 2 * head_dim]: attn_q · xn
  kGatedAttentionBufferEnd
};

class GatedAttentionBlock {
 public:
  // Reads <prefix>attn_q ([2 * n_heads * head_dim, n_embd]), attn_k, attn_v, attn_output and the
  // q/k norms ([head_dim]) with c's shapes; adds them to `weights`. Must not move afterwards.
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              WeightList& weights);

  // out = attn_output · (attention * sigmoid(gate)) of xn; stores this batch's K and V in the
  // layer's cache. Uses the workspace buffers kQueryGate, kQ, kK, kV, kAttn.
  // xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const RopeParams& rope, const float* xn, float* out,
               Workspace& ws) const;

  // Stores the K and V of xn's rows in the layer's cache alone (no attention): a layer whose
  // output nobody reads but whose cache later rows attend to (qwen35_nextn.h's catch-up).
  void StoreKv(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const RopeParams& rope, const float* xn, Workspace& ws) const;

 private:
  // k = rope(k_norm(attn_k · xn)), v = attn_v · xn.  k, v: [n_tokens, n_kv_heads * head_dim]
  void KeysValues(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                  const RopeParams& rope, const float* xn, float* k, float* v, Workspace& ws) const;

  WeightMatrix wq_;               // [2 * n_heads * head_dim, n_embd]: per head q, then its gate
  WeightMatrix wk_, wv_;          // [n_kv_heads * head_dim, n_embd]
  WeightMatrix wo_;               // [n_embd, n_heads * head_dim]
  WeightVector q_norm_, k_norm_;  // [head_dim]
};

}  // namespace kvserve
