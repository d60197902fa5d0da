#include "model/feed_forward.h"

#include "model/decoder_blocks.h"

namespace kvserve {

Status FeedForward::Load(const WeightLoader& r, const ModelConfig& c, const std::string& p,
                         WeightList& weights) {
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &w_up_));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_up.bias", c.n_ff, &b_up_));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &w_down_));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_down.bias", c.n_embd, &b_down_));
  weights.matrices.insert(weights.matrices.end(), {&w_up_, &w_down_});
  weights.vectors.insert(weights.vectors.end(), {&b_up_, &b_down_});
  return Status::Ok();
}

void FeedForward::Forward(const Backend& be, const ModelConfig& c, int n, const float* xn,
                          float* out, Workspace& ws) const {
  float* up = ws.Floats(kUp, static_cast<size_t>(n) * c.n_ff);
  be.Matmul(w_up_, xn, n, up, ws);
  be.AddBias(up, c.n_ff, b_up_.data(), n, c.n_ff, ws);
  be.Gelu(up, n, c.n_ff, ws);
  be.Matmul(w_down_, up, n, out, ws);
  be.AddBias(out, c.n_embd, b_down_.data(), n, c.n_embd, ws);
}

}  // namespace kvserve
