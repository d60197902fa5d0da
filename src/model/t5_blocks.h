// The sublayers of T5's encoder and decoder layers, as llama.cpp's t5 graph computes them:
// attention without biases, RoPE or score scaling (the relative position bias of
// t5_position_bias.h takes the place of both), and a feed-forward that is ReLU (T5 v1.0) or
// gated GELU (v1.1, FLAN-T5: the file has ffn_gate). Pre-norm RMSNorm everywhere, residual adds
// after each sublayer; tensor names are llama.cpp's (enc.blk.N.*, dec.blk.N.*).
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/gated_feed_forward.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

// Workspace buffers of T5's forward beyond the decoder's (decoder_blocks.h DecoderBuffer).
enum T5Buffer : int {
  kT5Encoded = 32,  // [n_tokens, n_embd]: the encoder's normed output
  kT5KeysK,         // [n_tokens, n_kv_heads * head_dim]: an encoder layer's K (its scratch cache)
  kT5KeysV,         // likewise V
};

// q, k, v and o of one attention sublayer: <prefix><stem>_{q,k,v,o}.weight, q and k/v
// [n_heads * head_dim / n_kv_heads * head_dim, n_embd], o [n_embd, n_heads * head_dim].
struct T5Projections {
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              const std::string& stem, WeightList& weights);
  // q, k, v = wq, wk, wv · xn.  xn: [n_tokens, n_embd]
  void Project(const Backend& be, const float* xn, int n_tokens, float* q, float* k, float* v,
               Workspace& ws) const {
    be.Matmul(wq, xn, n_tokens, q, ws);
    be.Matmul(wk, xn, n_tokens, k, ws);
    be.Matmul(wv, xn, n_tokens, v, ws);
  }

  WeightMatrix wq, wk, wv, wo;
};

// out = w_down · relu(w_up · xn) (no ffn_gate), or w_down · (gelu(w_gate · xn) * (w_up · xn)).
class T5FeedForward {
 public:
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              WeightList& weights);
  // Uses the workspace buffers kGate, kUp.  xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, int n_tokens, const float* xn, float* out,
               Workspace& ws) const;

 private:
  bool gated_ = false;
  GatedFeedForward gated_ffn_;
  WeightMatrix w_up_;    // [n_ff, n_embd], ReLU form
  WeightMatrix w_down_;  // [n_embd, n_ff], ReLU form
};

// One attention over `kv` of the rows q (n_heads heads of head_dim each): scale 1, the bias of
// `params` (its position_bias, none for cross-attention); writes attn, then out = wo · attn.
// Uses the workspace buffer kAttn.  q: [n_tokens, n_heads * head_dim]; out: [n_tokens, n_embd]
void T5Attend(const Backend& be, const ModelConfig& c, const KvLayerView& kv,
              const AttentionBatch& batch, const AttentionParams& params, const float* q,
              const WeightMatrix& wo, float* out, Workspace& ws);

}  // namespace kvserve
