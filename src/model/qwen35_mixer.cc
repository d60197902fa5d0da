#include "model/qwen35_mixer.h"

#include <cassert>
#include <utility>

namespace kvserve {

Status Qwen35Mixer::Load(const WeightLoader& r, const ModelConfig& c, const Qwen35Layout& layout,
                         int il, WeightList& weights) {
  recurrent_ = layout.IsRecurrent(il);
  const std::string p = "blk." + std::to_string(il) + ".";
  for (auto [name, v] : {std::pair{"attn_norm.weight", &attn_norm_},
                         {"post_attention_norm.weight", &post_attn_norm_}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.n_embd, v));
    weights.vectors.push_back(v);
  }
  if (recurrent_) return delta_.Load(r, c, layout.delta, p, weights);
  return attention_.Load(r, c, p, weights);
}

void Qwen35Mixer::Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                          const KvLayerView& kv, const RopeParams& rope, float* x, float* xn,
                          float* proj, Workspace& ws) const {
  const int n = batch.n_tokens();
  be.RmsNorm(x, attn_norm_.data(), n, c.n_embd, c.norm_eps, xn, ws);
  if (recurrent_) {
    delta_.Forward(be, c, batch, kv, xn, proj, ws);
  } else {
    attention_.Forward(be, c, batch, kv, rope, xn, proj, ws);
  }
  be.Add(x, proj, n, c.n_embd, ws);
  be.RmsNorm(x, post_attn_norm_.data(), n, c.n_embd, c.norm_eps, xn, ws);
}

void Qwen35Mixer::StoreKv(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                          const KvLayerView& kv, const RopeParams& rope, const float* x, float* xn,
                          Workspace& ws) const {
  assert(!recurrent_);
  be.RmsNorm(x, attn_norm_.data(), batch.n_tokens(), c.n_embd, c.norm_eps, xn, ws);
  attention_.StoreKv(be, c, batch, kv, rope, xn, ws);
}

}  // namespace kvserve
