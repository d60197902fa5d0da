// The llama architecture (Llama 1/2, TinyLlama, stories): RMSNorm, RoPE on q and k, grouped-query
// attention, SwiGLU feed-forward, optionally tied output.
#include <memory>
#include <string>
#include <vector>

#include "model/architectures.h"
#include "model/decoder_blocks.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct LlamaLayer {
  std::vector<float> attn_norm, ffn_norm;  // [n_embd]
  WeightMatrix wq;                         // [n_heads * head_dim, n_embd]
  WeightMatrix wk, wv;                     // [n_kv_heads * head_dim, n_embd]
  WeightMatrix wo;                         // [n_embd, n_heads * head_dim]
  WeightMatrix w_gate, w_up;               // [n_ff, n_embd]
  WeightMatrix w_down;                     // [n_embd, n_ff]
};

class LlamaModel final : public Model {
 public:
  LlamaModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    KVSERVE_RETURN_IF_ERROR(r.Matrix("token_embd.weight", c.n_vocab, c.n_embd, &token_embd_));
    KVSERVE_RETURN_IF_ERROR(r.Vector("output_norm.weight", c.n_embd, &output_norm_));
    output_ = &token_embd_;
    if (!c.tied_output) {
      KVSERVE_RETURN_IF_ERROR(r.Matrix("output.weight", c.n_vocab, c.n_embd, &own_output_));
      output_ = &own_output_;
    }
    layers_.resize(c.n_layers);
    std::vector<WeightMatrix*> matrices = {output_};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaLayer& l = layers_[i];
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l.w_gate));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &l.w_up));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &l.w_down));
      matrices.insert(matrices.end(), {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down});
    }
    DeclareMatrices(matrices);
    return Status::Ok();
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
    EmbedTokens(backend_, batch, token_embd_, b.x, ws);
    for (int il = 0; il < c.n_layers; ++il) Layer(layers_[il], batch, kv.layer(il), b, ws);
    auto norm = [&](const float* in, int n_rows, float* out) {
      backend_.RmsNorm(in, output_norm_.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(backend_, batch, b.x, c.n_embd, norm, *output_, logits, ws);
  }

 private:
  struct Buffers {
    float *x, *xn, *proj, *q, *attn, *k, *v, *gate, *up;
  };

  void Layer(const LlamaLayer& w, const ForwardBatch& batch, const KvLayerView& kv,
             const Buffers& b, Workspace& ws) const {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    be.RmsNorm(b.x, w.attn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    be.Matmul(w.wq, b.xn, n, b.q, ws);
    be.Matmul(w.wk, b.xn, n, b.k, ws);
    be.Matmul(w.wv, b.xn, n, b.v, ws);
    be.Rope(b.q, batch.positions, c.n_heads, c.head_dim, c.rope_dims, c.rope_freq_base, ws);
    be.Rope(b.k, batch.positions, c.n_kv_heads, c.head_dim, c.rope_dims, c.rope_freq_base, ws);
    SelfAttention(be, batch, kv, b.q, b.k, b.v, kv.row_elements(), c.n_heads, b.attn, ws);
    be.Matmul(w.wo, b.attn, n, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
    be.RmsNorm(b.x, w.ffn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    be.Matmul(w.w_gate, b.xn, n, b.gate, ws);
    be.Matmul(w.w_up, b.xn, n, b.up, ws);
    be.SwiGlu(b.gate, b.up, n, c.n_ff, ws);
    be.Matmul(w.w_down, b.gate, n, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
  }

  WeightMatrix token_embd_;         // [n_vocab, n_embd]
  WeightMatrix own_output_;         // [n_vocab, n_embd], unless tied
  WeightMatrix* output_ = nullptr;  // own_output_ or token_embd_
  std::vector<float> output_norm_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadLlama(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  auto model = std::make_unique<LlamaModel>(std::move(file), std::move(config), backend);
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kvserve
