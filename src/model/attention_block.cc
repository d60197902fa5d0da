#include "model/attention_block.h"

#include "model/decoder_blocks.h"

namespace kvserve {

Status AttentionBlock::Load(const WeightLoader& r, const ModelConfig& c, const std::string& p,
                            const AttentionBlockOptions& options, WeightList& weights) {
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  if (options.fused_qkv) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.n_embd, &wqkv_));
    weights.matrices.push_back(&wqkv_);
  } else {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &wq_));
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &wk_));
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &wv_));
    weights.matrices.insert(weights.matrices.end(), {&wq_, &wk_, &wv_});
  }
  if (options.qkv_bias && options.fused_qkv) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_qkv.bias", q_dim + 2 * kv_dim, &bqkv_));
  } else if (options.qkv_bias) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_q.bias", q_dim, &bq_));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k.bias", kv_dim, &bk_));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_v.bias", kv_dim, &bv_));
  }
  if (options.qk_norm) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_q_norm.weight", c.head_dim, &q_norm_));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k_norm.weight", c.head_dim, &k_norm_));
  }
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &wo_));
  weights.matrices.push_back(&wo_);
  if (options.output_bias) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_output.bias", c.n_embd, &bo_));
  }
  weights.vectors.insert(weights.vectors.end(),
                         {&bqkv_, &bq_, &bk_, &bv_, &q_norm_, &k_norm_, &bo_});
  return Status::Ok();
}

void AttentionBlock::Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                             const KvLayerView& kv, const AttentionCall& call, const float* xn,
                             float* out, Workspace& ws) const {
  const int n = batch.n_tokens();
  const int q_dim = c.n_heads * c.head_dim;
  const int kv_dim = c.n_kv_heads * c.head_dim;
  float* q = ws.Floats(kQ, static_cast<size_t>(n) * q_dim);
  float* k = ws.Floats(kK, static_cast<size_t>(n) * kv_dim);
  float* v = ws.Floats(kV, static_cast<size_t>(n) * kv_dim);
  float* attn = ws.Floats(kAttn, static_cast<size_t>(n) * q_dim);
  if (wqkv_.n_out > 0) {  // fused
    const int stride = q_dim + 2 * kv_dim;
    float* qkv = ws.Floats(kQkv, static_cast<size_t>(n) * stride);
    be.Matmul(wqkv_, xn, n, qkv, ws);
    if (!bqkv_.empty()) be.AddBias(qkv, stride, bqkv_.data(), n, stride, ws);
    be.CopyRows(qkv, stride, n, q_dim, q, ws);
    be.CopyRows(qkv + q_dim, stride, n, kv_dim, k, ws);
    be.CopyRows(qkv + q_dim + kv_dim, stride, n, kv_dim, v, ws);
  } else {
    const WeightMatrix* matrices[] = {&wq_, &wk_, &wv_};
    float* outputs[] = {q, k, v};
    be.MatmulSameInput(matrices, xn, n, outputs, ws);
  }
  if (!bq_.empty()) {
    be.AddBias(q, q_dim, bq_.data(), n, q_dim, ws);
    be.AddBias(k, kv_dim, bk_.data(), n, kv_dim, ws);
    be.AddBias(v, kv_dim, bv_.data(), n, kv_dim, ws);
  }
  if (!q_norm_.empty()) {  // each head is a row of head_dim; RmsNorm may work in place
    be.RmsNorm(q, q_norm_.data(), n * c.n_heads, c.head_dim, c.norm_eps, q, ws);
    be.RmsNorm(k, k_norm_.data(), n * c.n_kv_heads, c.head_dim, c.norm_eps, k, ws);
  }
  if (call.rope != nullptr) {
    be.Rope(q, batch.positions, c.n_heads, c.head_dim, *call.rope, ws);
    be.Rope(k, batch.positions, c.n_kv_heads, c.head_dim, *call.rope, ws);
  }
  SelfAttention(be, batch, kv, q, k, v, kv.row_elements(), c.n_heads, attn, ws,
                {.soft_cap = call.soft_cap, .scale = call.scale, .sinks = call.sinks});
  be.Matmul(wo_, attn, n, out, ws);
  if (!bo_.empty()) be.AddBias(out, c.n_embd, bo_.data(), n, c.n_embd, ws);
}

}  // namespace kvserve
