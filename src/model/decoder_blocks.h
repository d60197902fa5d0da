// Blocks that decoder architectures share, built from Backend operations: token (and learned
// position) embedding, paged self-attention over the KV cache, and the final norm + output
// projection of the rows that need logits. An architecture's file composes these with its own
// norms, projections and feed-forward, or, for the llama family, states its LlamaStyle options.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

// Workspace buffer ids of a decoder's forward pass.
enum DecoderBuffer : int {
  kX,
  kXn,
  kQ,
  kK,
  kV,
  kAttn,
  kProj,
  kGate,
  kUp,
  kQkv,
  kGateUp,
  kTmp,
  kLogitsIn
};

// The residual stream of a pre-norm decoder's forward: x, its norm xn, and a sublayer's output
// proj, each [n_tokens, n_embd], in the workspace buffers kX, kXn, kProj.
struct ResidualStream {
  ResidualStream(Workspace& ws, int n_tokens, int n_embd)
      : x(ws.Floats(kX, static_cast<size_t>(n_tokens) * n_embd)),
        xn(ws.Floats(kXn, static_cast<size_t>(n_tokens) * n_embd)),
        proj(ws.Floats(kProj, static_cast<size_t>(n_tokens) * n_embd)) {}
  float *x, *xn, *proj;
};

// x = rows of `token_embd` for the batch's tokens.  x: [n_tokens, n_embd]
void EmbedTokens(const Backend& backend, const ForwardBatch& batch, const WeightMatrix& token_embd,
                 float* x, Workspace& ws);

// Stores each token's K and V rows (n_kv_heads * head_dim floats, `kv_stride` floats apart) at its
// slot, then attn = causal softmax(scale * q · Kᵀ) · V per head, over the sequence's keys in the
// cache (this batch's included; the last kv.attention_window of them where the layer's cache kind
// has a window, the scores soft-capped with a soft_cap).
// q, attn: [n_tokens, n_heads * head_dim]
struct SelfAttentionOptions {
  float soft_cap = 0.0f;         // 0 = none
  float scale = 0.0f;            // the scores' factor; 0 = 1 / sqrt(head_dim)
  const float* sinks = nullptr;  // learned sink logit per query head [n_heads]; null = none
};
void SelfAttention(const Backend& backend, const ForwardBatch& batch, const KvLayerView& kv,
                   const float* q, const float* k, const float* v, size_t kv_stride, int n_heads,
                   float* attn, Workspace& ws, const SelfAttentionOptions& options = {});

// The KV spec of a decoder whose layers attend either to everything (window 0) or to a sliding
// window: one group per distinct window (a SlidingWindowKind group each, one FullCausalKind group
// for the global layers), all of c's KV shape.  windows: [n_layers]
KvSpec KvSpecByWindow(const ModelConfig& c, const std::vector<int>& windows);

// logits = output · norm(x row) for each of batch.logit_rows; `norm(in, n_rows, out)` is the
// architecture's final norm.  x: [n_tokens, n_embd]; logits: [logit_rows.size(), n_vocab]
// The token embedding, the final norm's weight and the output matrix (the embedding itself when the
// file has no output.weight). Holds a pointer into itself: loaded in place, never copied.
struct OutputHead {
  OutputHead() = default;
  OutputHead(const OutputHead&) = delete;
  OutputHead& operator=(const OutputHead&) = delete;
  // token_embd.weight [n_vocab, n_embd], output_norm.weight [n_embd], output.weight unless tied.
  Status Load(const WeightLoader& loader, const ModelConfig& config);

  WeightMatrix token_embd;         // [n_vocab, n_embd]
  WeightMatrix own_output;         // [n_vocab, n_embd], unless tied
  WeightMatrix* output = nullptr;  // own_output or token_embd
  WeightVector norm;               // [n_embd]
};

using RowNorm = std::function<void(const float* in, int n_rows, float* out)>;
// logits = output · norm(x) of the batch's logit rows; the normed rows go to batch.final_hidden
// when it is set.
void ProjectLogits(const Backend& backend, const ForwardBatch& batch, const float* x, int n_embd,
                   const RowNorm& norm, const WeightMatrix& output, float* logits, Workspace& ws);

// The pre-norm decoder of llama and its descendants: per layer x += wo · attention(rope(q),
// rope(k), v) of RMSNorm(x), then x += w_down · (silu(gate) * up) of RMSNorm(x); final RMSNorm and
// output (token_embd when the file has no output.weight). What an architecture changes is stated
// here and becomes per-layer data at load (a bias, a norm, a fused matrix is there or not), not
// branches on the architecture's name. Tensor names are llama.cpp's: blk.N.attn_q.weight, ...
struct LlamaStyleOptions {
  RopeMode rope_mode = RopeMode::kInterleaved;
  bool qkv_bias = false;       // attn_q.bias, attn_k.bias, attn_v.bias added after the projections
  bool qk_norm = false;        // attn_q_norm, attn_k_norm: RMSNorm of each head of q, k before RoPE
  bool fused_qkv = false;      // one attn_qkv.weight, rows q, then k, then v
  bool fused_gate_up = false;  // one ffn_up.weight of 2 * n_ff rows: gate, then up
  // Read <arch>.attention.sliding_window (Mistral's files): where it is set and positive, every
  // layer attends over that many most recent keys and the cache is one kSlidingWindow group.
  bool sliding_window = false;
};
// Reads the RMS epsilon, the RoPE scaling keys (refusing what kvserve does not implement) and the
// optional rope_freqs.weight (Llama 3: rope_dims / 2 frequency divisors), then every tensor.
Result<std::unique_ptr<Model>> LoadLlamaStyle(GgufFile file, ModelConfig config,
                                              const Backend& backend,
                                              const LlamaStyleOptions& options);

}  // namespace kvserve
