#include "model/gemma_decoder.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kv/sliding_window_kind.h"
#include "model/decoder_blocks.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct GemmaLayer {
  WeightVector attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd]
  WeightVector q_norm, k_norm;                                      // [head_dim], or empty
  WeightMatrix wq;                                                  // [q_dim, n_embd]
  WeightMatrix wk, wv;                                              // [kv_dim, n_embd]
  WeightMatrix wo;                                                  // [n_embd, q_dim]
  WeightMatrix w_gate, w_up;                                        // [n_ff, n_embd]
  WeightMatrix w_down;                                              // [n_embd, n_ff]
};

class GemmaModel final : public Model {
 public:
  GemmaModel(GgufFile file, ModelConfig config, const Backend& backend, GemmaOptions options)
      : Model(std::move(file), std::move(config), backend), options_(std::move(options)) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    const ModelConfig& c = config_;
    if (static_cast<int>(options_.layers.size()) != c.n_layers) {
      return Status::Internal(file_.path() + ": " + std::to_string(options_.layers.size()) +
                              " layer kinds for " + std::to_string(c.n_layers) + " layers");
    }
    const WeightLoader r(file_);
    const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    std::vector<WeightMatrix*> matrices = {head_.output};
    std::vector<WeightVector*> vectors = {&head_.norm};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      GemmaLayer& l = layers_[i];
      vectors.insert(vectors.end(), {&l.attn_norm, &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm,
                                     &l.q_norm, &l.k_norm});
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
      if (options_.qk_norm) {
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_q_norm.weight", c.head_dim, &l.q_norm));
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k_norm.weight", c.head_dim, &l.k_norm));
      }
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
      KVSERVE_RETURN_IF_ERROR(
          r.Vector(p + "post_attention_norm.weight", c.n_embd, &l.post_attn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l.w_gate));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &l.w_up));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &l.w_down));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "post_ffw_norm.weight", c.n_embd, &l.post_ffn_norm));
      matrices.insert(matrices.end(), {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down});
    }
    DeclareWeights(matrices, vectors);
    return Status::Ok();
  }

  // Local layers of one window form one sliding-window group (ascending windows), the global
  // layers one full causal group.
  KvSpec kv_spec() const override {
    const ModelConfig& c = config_;
    std::map<int, KvGroupSpec> by_window;  // window (0 = global) -> group
    for (int i = 0; i < c.n_layers; ++i) {
      const int window = options_.layers[i].window;
      KvGroupSpec& group = by_window[window];
      if (window > 0) group.kind = SlidingWindowKind::Make(window);
      group.n_kv_heads = c.n_kv_heads;
      group.head_dim = c.head_dim;
      group.layers.push_back(i);
    }
    KvSpec spec;
    for (auto& [window, group] : by_window) spec.groups.push_back(std::move(group));
    return spec;
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const size_t n = batch.n_tokens();
    const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
    const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
    Buffers b{.x = ws.Floats(kX, n * c.n_embd),
              .xn = ws.Floats(kXn, n * c.n_embd),
              .proj = ws.Floats(kProj, n * c.n_embd),
              .q = ws.Floats(kQ, n * q_dim),
              .attn = ws.Floats(kAttn, n * q_dim),
              .k = ws.Floats(kK, n * kv_dim),
              .v = ws.Floats(kV, n * kv_dim),
              .gate = ws.Floats(kGate, n * c.n_ff),
              .up = ws.Floats(kUp, n * c.n_ff)};
    EmbedTokens(backend_, batch, head_.token_embd, b.x, ws);
    backend_.Scale(b.x, static_cast<int>(n), c.n_embd, std::sqrt(static_cast<float>(c.n_embd)), ws);
    for (int il = 0; il < c.n_layers; ++il) {
      Layer(layers_[il], options_.layers[il], batch, kv.layer(il), b, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      backend_.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(backend_, batch, b.x, c.n_embd, norm, *head_.output, logits, ws);
    if (options_.final_soft_cap > 0.0f) {
      backend_.SoftCap(logits, static_cast<int>(batch.logit_rows.size()), c.n_vocab,
                       options_.final_soft_cap, ws);
    }
  }

 private:
  struct Buffers {
    float *x, *xn, *proj, *q, *attn, *k, *v, *gate, *up;
  };

  void Layer(const GemmaLayer& w, const GemmaLayerAttention& a, const ForwardBatch& batch,
             const KvLayerView& kv, const Buffers& b, Workspace& ws) const {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    be.RmsNorm(b.x, w.attn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    be.Matmul(w.wq, b.xn, n, b.q, ws);
    be.Matmul(w.wk, b.xn, n, b.k, ws);
    be.Matmul(w.wv, b.xn, n, b.v, ws);
    if (!w.q_norm.empty()) {  // each head is a row of head_dim; RmsNorm may work in place
      be.RmsNorm(b.q, w.q_norm.data(), n * c.n_heads, c.head_dim, c.norm_eps, b.q, ws);
      be.RmsNorm(b.k, w.k_norm.data(), n * c.n_kv_heads, c.head_dim, c.norm_eps, b.k, ws);
    }
    be.Rope(b.q, batch.positions, c.n_heads, c.head_dim, a.rope, ws);
    be.Rope(b.k, batch.positions, c.n_kv_heads, c.head_dim, a.rope, ws);
    SelfAttention(be, batch, kv, b.q, b.k, b.v, kv.row_elements(), c.n_heads, b.attn, ws,
                  {.soft_cap = a.soft_cap});
    be.Matmul(w.wo, b.attn, n, b.proj, ws);
    be.RmsNorm(b.proj, w.post_attn_norm.data(), n, c.n_embd, c.norm_eps, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
    be.RmsNorm(b.x, w.ffn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    be.Matmul(w.w_gate, b.xn, n, b.gate, ws);
    be.Matmul(w.w_up, b.xn, n, b.up, ws);
    be.GeGlu(b.gate, b.up, n, c.n_ff, ws);
    be.Matmul(w.w_down, b.gate, n, b.proj, ws);
    be.RmsNorm(b.proj, w.post_ffn_norm.data(), n, c.n_embd, c.norm_eps, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
  }

  GemmaOptions options_;
  OutputHead head_;
  std::vector<GemmaLayer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGemma(GgufFile file, ModelConfig config, const Backend& backend,
                                         GemmaOptions options) {
  auto model =
      std::make_unique<GemmaModel>(std::move(file), std::move(config), backend, std::move(options));
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kvserve
