// The attention sublayer of a decoder (GPT-2, llama and its descendants, Gemma 2/3, Qwen 3 MoE,
// Granite), as one self-loading block: q, k, v projections (three matrices or one fused attn_qkv,
// optional biases), optional per-head q/k RMSNorm, RoPE where the call gives it, paged
// self-attention over the layer's cache, and the output projection (optional bias). The norm before
// it and the residual after it are the layer's own.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

struct AttentionBlockOptions {
  // attn_q.bias, attn_k.bias, attn_v.bias (fused: attn_qkv.bias) added after the projections
  bool qkv_bias = false;
  bool qk_norm = false;      // attn_q_norm, attn_k_norm: RMSNorm of each head of q, k before RoPE
  bool fused_qkv = false;    // one attn_qkv.weight, rows q, then k, then v
  bool output_bias = false;  // attn_output.bias added after the output projection
};

// One layer's parameters of the attention that are not weights.
struct AttentionCall {
  const RopeParams* rope = nullptr;  // null: no rotary embedding (GPT-2's learned positions)
  float soft_cap = 0.0f;             // attention score soft-cap; 0 = none
  float scale = 0.0f;                // attention scores' factor; 0 = 1 / sqrt(head_dim)
  const float* sinks = nullptr;      // learned sink logit per query head [n_heads]; null = none
};

class AttentionBlock {
 public:
  // Reads <prefix>attn_q/k/v.weight (or attn_qkv.weight), the biases and q/k norms the options
  // ask for, and attn_output.weight, with c's shapes; adds them to `weights`. The block must not
  // move afterwards (the model keeps pointers to its weights).
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              const AttentionBlockOptions& options, WeightList& weights);

  // out = wo · attention(rope(q), rope(k), v) (+ bo), q, k, v the projections of xn; stores this
  // batch's K and V in the layer's cache. Uses the workspace buffers kQ, kK, kV, kAttn (and kQkv
  // fused). xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const AttentionCall& call, const float* xn, float* out,
               Workspace& ws) const;

 private:
  WeightMatrix wq_;               // [q_dim, n_embd]
  WeightMatrix wk_, wv_;          // [kv_dim, n_embd]
  WeightMatrix wqkv_;             // [q_dim + 2 * kv_dim, n_embd], when fused
  WeightVector bq_, bk_, bv_;     // [q_dim], [kv_dim], [kv_dim], or empty
  WeightVector q_norm_, k_norm_;  // [head_dim], or empty
  WeightVector bqkv_;             // [q_dim + 2 * kv_dim], fused with a bias
  WeightMatrix wo_;               // [n_embd, q_dim]
  WeightVector bo_;               // [n_embd], or empty
};

}  // namespace kvserve
