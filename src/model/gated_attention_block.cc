#include "model/gated_attention_block.h"

#include <tuple>
#include <utility>

#include "model/decoder_blocks.h"

namespace kvserve {

Status GatedAttentionBlock::Load(const WeightLoader& r, const ModelConfig& c, const std::string& p,
                                 WeightList& weights) {
  const int q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  for (auto [name, m, n_out, n_in] : {std::tuple{"attn_q.weight", &wq_, 2 * q_dim, c.n_embd},
                                      {"attn_k.weight", &wk_, kv_dim, c.n_embd},
                                      {"attn_v.weight", &wv_, kv_dim, c.n_embd},
                                      {"attn_output.weight", &wo_, c.n_embd, q_dim}}) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + name, n_out, n_in, m));
    weights.matrices.push_back(m);
  }
  for (auto [name, v] :
       {std::pair{"attn_q_norm.weight", &q_norm_}, {"attn_k_norm.weight", &k_norm_}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.head_dim, v));
    weights.vectors.push_back(v);
  }
  return Status::Ok();
}

void GatedAttentionBlock::KeysValues(const Backend& be, const ModelConfig& c,
                                     const ForwardBatch& batch, const RopeParams& rope,
                                     const float* xn, float* k, float* v, Workspace& ws) const {
  const int n = batch.n_tokens(), d = c.head_dim;
  be.Matmul(wk_, xn, n, k, ws);
  be.Matmul(wv_, xn, n, v, ws);
  be.RmsNorm(k, k_norm_.data(), n * c.n_kv_heads, d, c.norm_eps, k, ws);
  be.Rope(k, batch.positions, c.n_kv_heads, d, rope, ws);
}

void GatedAttentionBlock::StoreKv(const Backend& be, const ModelConfig& c,
                                  const ForwardBatch& batch, const KvLayerView& kv,
                                  const RopeParams& rope, const float* xn, Workspace& ws) const {
  const size_t rows = static_cast<size_t>(batch.n_tokens());
  const int kv_dim = c.n_kv_heads * c.head_dim;
  float* k = ws.Floats(kK, rows * kv_dim);
  float* v = ws.Floats(kV, rows * kv_dim);
  KeysValues(be, c, batch, rope, xn, k, v, ws);
  be.StoreKv(kv, batch.slots(kv.group), k, v, kv_dim, ws);
}

void GatedAttentionBlock::Forward(const Backend& be, const ModelConfig& c,
                                  const ForwardBatch& batch, const KvLayerView& kv,
                                  const RopeParams& rope, const float* xn, float* out,
                                  Workspace& ws) const {
  const int n = batch.n_tokens(), d = c.head_dim;
  const int q_dim = c.n_heads * d, kv_dim = c.n_kv_heads * d;
  const size_t rows = static_cast<size_t>(n);
  float* qg = ws.Floats(kQueryGate, rows * 2 * q_dim);
  float* q = ws.Floats(kQ, rows * q_dim);
  float* k = ws.Floats(kK, rows * kv_dim);
  float* v = ws.Floats(kV, rows * kv_dim);
  float* attn = ws.Floats(kAttn, rows * q_dim);
  be.Matmul(wq_, xn, n, qg, ws);
  be.CopyRows(qg, 2 * d, n * c.n_heads, d, q, ws);  // each head's q; its gate follows it
  be.RmsNorm(q, q_norm_.data(), n * c.n_heads, d, c.norm_eps, q, ws);
  be.Rope(q, batch.positions, c.n_heads, d, rope, ws);
  KeysValues(be, c, batch, rope, xn, k, v, ws);
  SelfAttention(be, batch, kv, q, k, v, kv_dim, c.n_heads, attn, ws);
  be.SigmoidGate(attn, qg + d, 2 * d, n * c.n_heads, d, ws);
  be.Matmul(wo_, attn, n, out, ws);
}

}  // namespace kvserve
