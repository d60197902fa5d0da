// The gated feed-forward sublayer of llama-style and Gemma decoders, as one self-loading block:
// out = w_down · (act(w_gate · xn) * (w_up · xn)), act SiLU (SwiGLU) or tanh-GELU (GeGLU), the
// gate and up projections as two matrices or one fused ffn_up of 2 * n_ff rows. The norm before it
// and the residual after it are the layer's own.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

enum class GateActivation { kSilu, kGelu };

struct GatedFeedForwardOptions {
  GateActivation activation = GateActivation::kSilu;
  bool fused_gate_up = false;  // one ffn_up.weight of 2 * n_ff rows: gate, then up
  // Appended to the tensor names' stem (ffn_gate<suffix>.weight): "_shexp" for a mixture's shared
  // expert (qwen35moe).
  const char* name_suffix = "";
  int n_ff = 0;  // the hidden width; 0: c.n_ff
};

class GatedFeedForward {
 public:
  // Reads <prefix>ffn_gate.weight and ffn_up.weight (or the fused ffn_up.weight) and
  // ffn_down.weight (each stem with the options' suffix) with c's shapes and the options' width;
  // adds them to `weights`. Must not move afterwards.
  Status Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
              const GatedFeedForwardOptions& options, WeightList& weights);

  // Uses the workspace buffers kGate, kUp (and kGateUp fused).  xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, int n_tokens, const float* xn, float* out,
               Workspace& ws) const;

 private:
  WeightMatrix w_gate_, w_up_;  // [n_ff, n_embd]
  WeightMatrix w_gate_up_;      // [2 * n_ff, n_embd], when fused
  WeightMatrix w_down_;         // [n_embd, n_ff]
  GatedFeedForwardOptions options_;
  int n_ff_ = 0;  // the hidden width
};

}  // namespace kvserve
