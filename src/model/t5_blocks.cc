#include "model/t5_blocks.h"

#include "model/decoder_blocks.h"

namespace kvserve {

Status T5Projections::Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
                           const std::string& stem, WeightList& weights) {
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  const std::string p = prefix + stem;
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "_q.weight", q_dim, c.n_embd, &wq));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "_k.weight", kv_dim, c.n_embd, &wk));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "_v.weight", kv_dim, c.n_embd, &wv));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "_o.weight", c.n_embd, q_dim, &wo));
  weights.matrices.insert(weights.matrices.end(), {&wq, &wk, &wv, &wo});
  return Status::Ok();
}

Status T5FeedForward::Load(const WeightLoader& r, const ModelConfig& c, const std::string& prefix,
                           WeightList& weights) {
  gated_ = r.Has(prefix + "ffn_gate.weight");
  if (gated_) {
    return gated_ffn_.Load(r, c, prefix, {.activation = GateActivation::kGelu}, weights);
  }
  KVSERVE_RETURN_IF_ERROR(r.Matrix(prefix + "ffn_up.weight", c.n_ff, c.n_embd, &w_up_));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(prefix + "ffn_down.weight", c.n_embd, c.n_ff, &w_down_));
  weights.matrices.insert(weights.matrices.end(), {&w_up_, &w_down_});
  return Status::Ok();
}

void T5FeedForward::Forward(const Backend& be, const ModelConfig& c, int n_tokens, const float* xn,
                            float* out, Workspace& ws) const {
  if (gated_) return gated_ffn_.Forward(be, c, n_tokens, xn, out, ws);
  float* up = ws.Floats(kUp, static_cast<size_t>(n_tokens) * c.n_ff);
  be.Matmul(w_up_, xn, n_tokens, up, ws);
  be.Relu(up, n_tokens, c.n_ff, ws);
  be.Matmul(w_down_, up, n_tokens, out, ws);
}

void T5Attend(const Backend& be, const ModelConfig& c, const KvLayerView& kv,
              const AttentionBatch& batch, const AttentionParams& params, const float* q,
              const WeightMatrix& wo, float* out, Workspace& ws) {
  const int n = static_cast<int>(batch.positions.size());
  float* attn = ws.Floats(kAttn, static_cast<size_t>(n) * c.n_heads * c.head_dim);
  be.PagedAttention(kv, batch, q, c.n_heads, params, attn, ws);
  be.Matmul(wo, attn, n, out, ws);
}

}  // namespace kvserve
