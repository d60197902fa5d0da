#include "model/gated_feed_forward.h"

#include "model/decoder_blocks.h"

namespace kvserve {

Status GatedFeedForward::Load(const WeightLoader& r, const ModelConfig& c, const std::string& p,
                              const GatedFeedForwardOptions& options, WeightList& weights) {
  options_ = options;
  n_ff_ = options.n_ff > 0 ? options.n_ff : c.n_ff;
  auto name = [&](const char* stem) { return p + stem + options.name_suffix + ".weight"; };
  if (options.fused_gate_up) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(name("ffn_up"), 2 * n_ff_, c.n_embd, &w_gate_up_));
    weights.matrices.push_back(&w_gate_up_);
  } else {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(name("ffn_gate"), n_ff_, c.n_embd, &w_gate_));
    KVSERVE_RETURN_IF_ERROR(r.Matrix(name("ffn_up"), n_ff_, c.n_embd, &w_up_));
    weights.matrices.insert(weights.matrices.end(), {&w_gate_, &w_up_});
  }
  KVSERVE_RETURN_IF_ERROR(r.Matrix(name("ffn_down"), c.n_embd, n_ff_, &w_down_));
  weights.matrices.push_back(&w_down_);
  return Status::Ok();
}

void GatedFeedForward::Forward(const Backend& be, const ModelConfig& c, int n, const float* xn,
                               float* out, Workspace& ws) const {
  const size_t n_ff = static_cast<size_t>(n_ff_);
  float* gate = ws.Floats(kGate, n * n_ff);
  float* up = ws.Floats(kUp, n * n_ff);
  if (options_.fused_gate_up) {
    float* gate_up = ws.Floats(kGateUp, n * 2 * n_ff);
    be.Matmul(w_gate_up_, xn, n, gate_up, ws);
    be.CopyRows(gate_up, 2 * n_ff, n, n_ff_, gate, ws);
    be.CopyRows(gate_up + n_ff, 2 * n_ff, n, n_ff_, up, ws);
  } else {
    const WeightMatrix* matrices[] = {&w_gate_, &w_up_};
    float* outputs[] = {gate, up};
    be.MatmulSameInput(matrices, xn, n, outputs, ws);
  }
  if (options_.activation == GateActivation::kSilu) {
    be.SwiGlu(gate, up, n, n_ff_, ws);
  } else {
    be.GeGlu(gate, up, n, n_ff_, ws);
  }
  be.Matmul(w_down_, gate, n, out, ws);
}

}  // namespace kvserve
