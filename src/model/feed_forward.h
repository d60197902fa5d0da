// The plain (ungated) feed-forward sublayer of GPT-2-style decoders, as one self-loading block:
// out = w_down · gelu(w_up · xn + b_up) + b_down, tanh-GELU. The norm before it and the residual
// after it are the layer's own. (Gated variants: gated_feed_forward.h.)
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

class FeedForward {
 public:
  // Reads <prefix>ffn_up.weight and .bias, ffn_down.weight and .bias with c's shapes; adds them
  // to `weights`. Must not move afterwards.
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              WeightList& weights);

  // Uses the workspace buffer kUp.  xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, int n_tokens, const float* xn, float* out,
               Workspace& ws) const;

 private:
  WeightMatrix w_up_;    // [n_ff, n_embd]
  WeightVector b_up_;    // [n_ff]
  WeightMatrix w_down_;  // [n_embd, n_ff]
  WeightVector b_down_;  // [n_embd]
};

}  // namespace kvserve
