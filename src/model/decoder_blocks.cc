#include "model/decoder_blocks.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "kv/sliding_window_kind.h"
#include "model/weight_loader.h"

namespace kvserve {

void EmbedTokens(const Backend& backend, const ForwardBatch& batch, const WeightMatrix& token_embd,
                 float* x, Workspace& ws) {
  backend.GetRows(token_embd, batch.tokens, x, ws);
}

void SelfAttention(const Backend& backend, const ForwardBatch& batch, const KvLayerView& kv,
                   const float* q, const float* k, const float* v, size_t kv_stride, int n_heads,
                   float* attn, Workspace& ws, const SelfAttentionOptions& options) {
  backend.StoreKv(kv, batch.slots(kv.group), k, v, kv_stride, ws);
  const AttentionParams params{.scale = 1.0f / std::sqrt(static_cast<float>(kv.head_dim)),
                               .window = kv.attention_window,
                               .soft_cap = options.soft_cap};
  backend.PagedAttention(kv, batch.attention(kv.group), q, n_heads, params, attn, ws);
}

Status OutputHead::Load(const WeightLoader& loader, const ModelConfig& config) {
  KVSERVE_RETURN_IF_ERROR(
      loader.Matrix("token_embd.weight", config.n_vocab, config.n_embd, &token_embd));
  KVSERVE_RETURN_IF_ERROR(loader.Vector("output_norm.weight", config.n_embd, &norm));
  output = &token_embd;
  if (!config.tied_output) {
    KVSERVE_RETURN_IF_ERROR(
        loader.Matrix("output.weight", config.n_vocab, config.n_embd, &own_output));
    output = &own_output;
  }
  return Status::Ok();
}

void ProjectLogits(const Backend& backend, const ForwardBatch& batch, const float* x, int n_embd,
                   const RowNorm& norm, const WeightMatrix& output, float* logits, Workspace& ws) {
  const int n_out = static_cast<int>(batch.logit_rows.size());
  if (n_out == 0) return;
  float* rows = ws.Floats(kTmp, static_cast<size_t>(n_out) * n_embd);
  float* normed = ws.Floats(kLogitsIn, static_cast<size_t>(n_out) * n_embd);
  backend.GatherRows(x, n_embd, batch.logit_rows, n_embd, rows);
  norm(rows, n_out, normed);
  backend.Matmul(output, normed, n_out, logits, ws);
}

namespace {

struct LlamaStyleLayer {
  WeightVector attn_norm, ffn_norm;  // [n_embd]
  WeightMatrix wq;                   // [q_dim, n_embd]
  WeightMatrix wk, wv;               // [kv_dim, n_embd]
  WeightMatrix wqkv;                 // [q_dim + 2 * kv_dim, n_embd], when fused
  WeightVector bq, bk, bv;           // [q_dim], [kv_dim], [kv_dim], or empty
  WeightVector q_norm, k_norm;       // [head_dim], or empty
  WeightMatrix wo;                   // [n_embd, q_dim]
  WeightMatrix w_gate, w_up;         // [n_ff, n_embd]
  WeightMatrix w_gate_up;            // [2 * n_ff, n_embd], when fused
  WeightMatrix w_down;               // [n_embd, n_ff]
  bool fused_qkv = false, fused_gate_up = false;
};

class LlamaStyleModel final : public Model {
 public:
  LlamaStyleModel(GgufFile file, ModelConfig config, const Backend& backend,
                  const LlamaStyleOptions& options)
      : Model(std::move(file), std::move(config), backend), options_(options) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_));
    if (options_.sliding_window) {
      auto window = file_.GetUintOr(config_.arch + ".attention.sliding_window", 0);
      if (!window.ok()) return window.status();
      if (*window > static_cast<uint64_t>(INT32_MAX)) {
        return Status::InvalidArgument(file_.path() + ": key '" + config_.arch +
                                       ".attention.sliding_window' = " + std::to_string(*window) +
                                       " is too large");
      }
      window_ = static_cast<int>(*window);
    }
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
      if (file_.FindTensor(name) != nullptr) {
        return Status::InvalidArgument(file_.path() + ": tensor '" + name +
                                       "' (LongRoPE) is not supported");
      }
    }
    rope_ = RopeParams{.rope_dims = c.rope_dims,
                       .freq_base = c.rope_freq_base,
                       .mode = options_.rope_mode,
                       .position_scale = c.rope_position_scale};
    if (file_.FindTensor("rope_freqs.weight") != nullptr) {
      KVSERVE_RETURN_IF_ERROR(r.Vector("rope_freqs.weight", c.rope_dims / 2, &rope_freqs_));
    }
    const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    std::vector<WeightMatrix*> matrices = {head_.output};
    std::vector<WeightVector*> vectors = {&head_.norm, &rope_freqs_};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaStyleLayer& l = layers_[i];
      vectors.insert(vectors.end(),
                     {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm});
      l.fused_qkv = options_.fused_qkv;
      l.fused_gate_up = options_.fused_gate_up;
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      if (l.fused_qkv) {
        KVSERVE_RETURN_IF_ERROR(
            r.Matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.n_embd, &l.wqkv));
        matrices.push_back(&l.wqkv);
      } else {
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
        matrices.insert(matrices.end(), {&l.wq, &l.wk, &l.wv});
      }
      if (options_.qkv_bias) {
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_q.bias", q_dim, &l.bq));
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k.bias", kv_dim, &l.bk));
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_v.bias", kv_dim, &l.bv));
      }
      if (options_.qk_norm) {
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_q_norm.weight", c.head_dim, &l.q_norm));
        KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k_norm.weight", c.head_dim, &l.k_norm));
      }
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      if (l.fused_gate_up) {
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", 2 * c.n_ff, c.n_embd, &l.w_gate_up));
        matrices.push_back(&l.w_gate_up);
      } else {
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l.w_gate));
        KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &l.w_up));
        matrices.insert(matrices.end(), {&l.w_gate, &l.w_up});
      }
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &l.w_down));
      matrices.insert(matrices.end(), {&l.wo, &l.w_down});
    }
    DeclareWeights(matrices, vectors);
    if (!rope_freqs_.empty()) rope_.freq_factors = rope_freqs_.data();  // prepared by now
    return Status::Ok();
  }

  KvSpec kv_spec() const override {
    KvSpec spec = Model::kv_spec();
    if (window_ > 0) spec.groups[0].kind = SlidingWindowKind::Make(window_);
    return spec;
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const size_t n = batch.n_tokens();
    const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
    const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
    // The fused products: q, k, v rows side by side, or gate and up rows side by side.
    const size_t fused = std::max(q_dim + 2 * kv_dim, 2 * static_cast<size_t>(c.n_ff));
    Buffers b{.x = ws.Floats(kX, n * c.n_embd),
              .xn = ws.Floats(kXn, n * c.n_embd),
              .proj = ws.Floats(kProj, n * c.n_embd),
              .q = ws.Floats(kQ, n * q_dim),
              .attn = ws.Floats(kAttn, n * q_dim),
              .k = ws.Floats(kK, n * kv_dim),
              .v = ws.Floats(kV, n * kv_dim),
              .gate = ws.Floats(kGate, n * c.n_ff),
              .up = ws.Floats(kUp, n * c.n_ff),
              .fused = options_.fused_qkv || options_.fused_gate_up ? ws.Floats(kQkv, n * fused)
                                                                    : nullptr};
    EmbedTokens(backend_, batch, head_.token_embd, b.x, ws);
    for (int il = 0; il < c.n_layers; ++il) Layer(layers_[il], batch, kv.layer(il), b, ws);
    auto norm = [&](const float* in, int n_rows, float* out) {
      backend_.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(backend_, batch, b.x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  struct Buffers {
    float *x, *xn, *proj, *q, *attn, *k, *v, *gate, *up, *fused;
  };

  void Layer(const LlamaStyleLayer& w, const ForwardBatch& batch, const KvLayerView& kv,
             const Buffers& b, Workspace& ws) const {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const int q_dim = c.n_heads * c.head_dim;
    const int kv_dim = c.n_kv_heads * c.head_dim;
    be.RmsNorm(b.x, w.attn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    if (w.fused_qkv) {
      const size_t stride = static_cast<size_t>(q_dim) + 2 * kv_dim;
      be.Matmul(w.wqkv, b.xn, n, b.fused, ws);
      be.CopyRows(b.fused, stride, n, q_dim, b.q);
      be.CopyRows(b.fused + q_dim, stride, n, kv_dim, b.k);
      be.CopyRows(b.fused + q_dim + kv_dim, stride, n, kv_dim, b.v);
    } else {
      be.Matmul(w.wq, b.xn, n, b.q, ws);
      be.Matmul(w.wk, b.xn, n, b.k, ws);
      be.Matmul(w.wv, b.xn, n, b.v, ws);
    }
    if (!w.bq.empty()) {
      be.AddBias(b.q, q_dim, w.bq.data(), n, q_dim, ws);
      be.AddBias(b.k, kv_dim, w.bk.data(), n, kv_dim, ws);
      be.AddBias(b.v, kv_dim, w.bv.data(), n, kv_dim, ws);
    }
    if (!w.q_norm.empty()) {  // each head is a row of head_dim; RmsNorm may work in place
      be.RmsNorm(b.q, w.q_norm.data(), n * c.n_heads, c.head_dim, c.norm_eps, b.q, ws);
      be.RmsNorm(b.k, w.k_norm.data(), n * c.n_kv_heads, c.head_dim, c.norm_eps, b.k, ws);
    }
    be.Rope(b.q, batch.positions, c.n_heads, c.head_dim, rope_, ws);
    be.Rope(b.k, batch.positions, c.n_kv_heads, c.head_dim, rope_, ws);
    SelfAttention(be, batch, kv, b.q, b.k, b.v, kv.row_elements(), c.n_heads, b.attn, ws);
    be.Matmul(w.wo, b.attn, n, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
    be.RmsNorm(b.x, w.ffn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    if (w.fused_gate_up) {
      be.Matmul(w.w_gate_up, b.xn, n, b.fused, ws);
      be.CopyRows(b.fused, 2 * static_cast<size_t>(c.n_ff), n, c.n_ff, b.gate);
      be.CopyRows(b.fused + c.n_ff, 2 * static_cast<size_t>(c.n_ff), n, c.n_ff, b.up);
    } else {
      be.Matmul(w.w_gate, b.xn, n, b.gate, ws);
      be.Matmul(w.w_up, b.xn, n, b.up, ws);
    }
    be.SwiGlu(b.gate, b.up, n, c.n_ff, ws);
    be.Matmul(w.w_down, b.gate, n, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
  }

  LlamaStyleOptions options_;
  int window_ = 0;           // sliding window of every layer; 0 = none
  RopeParams rope_;          // freq_factors points into rope_freqs_
  WeightVector rope_freqs_;  // [rope_dims / 2], Llama 3; empty otherwise
  OutputHead head_;
  std::vector<LlamaStyleLayer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadLlamaStyle(GgufFile file, ModelConfig config,
                                              const Backend& backend,
                                              const LlamaStyleOptions& options) {
  auto model =
      std::make_unique<LlamaStyleModel>(std::move(file), std::move(config), backend, options);
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace kvserve
