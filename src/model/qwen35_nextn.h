// Qwen3.5's multi-token-prediction layer (MTP, "nextn": one layer past the main stack), as
// llama.cpp's qwen35 MTP graph computes it. For a token x at position p and a hidden row h (the
// target's final hidden row, after output_norm, at p - 1: the row that chose x):
//   y = nextn.eh_proj · [enorm(token_embd[x]) | hnorm(h)]                    [2 n_embd -> n_embd]
// then a gated full-attention Qwen3.5 layer (qwen35_mixer.h, blk.<L>.*: attn_norm, attention over
// the layer's own cache, post_attention_norm) and the layer's feed-forward (the architecture's:
// SwiGLU or the mixture) with their residuals, then h' = shared_head_norm(y) (output_norm when
// the file has none) and logits = output · h'. h' is the next drafting step's hidden row.
//
// The layer's cache holds, at every position p the target computed, the K/V of (x_p, h_{p-1})
// (h_{-1} = zeros): the target's Forward fills it for every row (CatchUp: K/V alone, no
// attention). The row before a batch's first row of a sequence may be in an earlier step, a
// prefix-cache hit or a checkpoint: so h_{p-1} is kept like the delta net's state, n_embd floats
// past the first recurrent layer's state in each state block (qwen35_layout.h Spec), and follows
// the same checkpoints and rollbacks.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_cache.h"
#include "model/decoder_blocks.h"
#include "model/forward_batch.h"
#include "model/gated_attention_block.h"
#include "model/model_config.h"
#include "model/qwen35_layout.h"
#include "model/qwen35_mixer.h"
#include "model/weight_loader.h"

namespace kvserve {

// Workspace buffer ids, past the gated attention's; an architecture using it starts its own at
// kNextnBufferEnd.
enum NextnBuffer : int {
  kNextnHidden = kGatedAttentionBufferEnd,  // [n_tokens, n_embd]: output_norm(x) of every row
  kNextnPrev,                               // [n_tokens, n_embd]: h_{p-1} of each row
  kNextnEmbd,                               // [n_tokens, n_embd]: enorm(token_embd[x])
  kNextnJoined,                             // [n_tokens, 2 n_embd]: [embd | hnorm(h)]
  kNextnBufferEnd
};

class Qwen35Nextn {
 public:
  // Reads blk.<il>.nextn.eh_proj, enorm, hnorm and the optional shared_head_norm (the norm of
  // `head` otherwise); the layer's mixer and feed-forward are the architecture's. `head` must
  // outlive this. The state layer (where h_{p-1} lives, at `state_offset` floats) is the first
  // recurrent layer of `layout`.
  Status Load(const WeightLoader& r, const ModelConfig& c, const Qwen35Layout& layout, int il,
              const OutputHead& head, WeightList& weights);

  int layer() const { return layer_; }

  // The catch-up of a target forward: `hidden` = output_norm(x) of every row [n_tokens, n_embd];
  // stores each row's K/V in the MTP layer's cache (through `mixer`, the MTP layer's) and leaves
  // each sequence's last h in its state blocks. Uses kX and kXn as scratch.
  void CatchUp(const Backend& be, const ModelConfig& c, const ForwardBatch& batch, KvCache& kv,
               const Qwen35Mixer& mixer, const RopeParams& rope, const float* hidden,
               Workspace& ws) const;

  // y = eh_proj · [enorm(token_embd[tokens]) | hnorm(hidden)].  hidden, y: [n_tokens, n_embd]
  void Input(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
             const float* hidden, float* y, Workspace& ws) const;

  // hidden_next = head norm(y) and logits = output · hidden_next of every row.
  void Output(const Backend& be, const ModelConfig& c, int n, const float* y, float* logits,
              float* hidden_next, Workspace& ws) const;

 private:
  // prev row r = the hidden row before row r in its sequence (from this batch, its state block or
  // zeros at position 0); each run's last row goes to its state block.
  void CarryHidden(const Backend& be, const ModelConfig& c, const ForwardBatch& batch, KvCache& kv,
                   const float* hidden, float* prev, Workspace& ws) const;

  int layer_ = -1;        // the MTP layer's index (its cache layer)
  int state_layer_ = -1;  // the recurrent layer whose state blocks keep h_{p-1}
  int64_t state_offset_ = 0;
  const OutputHead* head_ = nullptr;
  WeightMatrix eh_proj_;                           // [n_embd, 2 n_embd]
  WeightVector enorm_, hnorm_, shared_head_norm_;  // [n_embd]
  const WeightVector* head_norm_ = nullptr;        // shared_head_norm_ or the head's
};

// The file's MTP layers kvserve runs: nextn_predict_layers of 0 or 1 (llama.cpp runs one), set to
// 0 when the layer's nextn.eh_proj is not in the file (converted without it); more is refused by
// the key's name.
Status ResolveNextnLayers(const WeightLoader& r, const ModelConfig& c, Qwen35Layout& layout);

// The end of a Qwen3.5 forward: logits of the batch's logit rows (output · output_norm(x)); with
// `nextn` (and `mixer`, its layer's), output_norm of every row first and the MTP layer's
// catch-up. x: [n_tokens, n_embd]
void FinishForward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                   const OutputHead& head, const Qwen35Nextn* nextn, const Qwen35Mixer& mixer,
                   const RopeParams& rope, const float* x, KvCache& kv, float* logits,
                   Workspace& ws);

}  // namespace kvserve
