// The gemma4 architecture (Gemma 4: E2B/E4B and the 26B-A4B mixture of experts), as llama.cpp's
// gemma4 graph reads its GGUF files. What sets it apart from Gemma 3:
// - layers whose K/V are another layer's: the last attention.shared_kv_layers layers keep no
//   cache; each reads the cache of the last layer with a cache of its own kind (a sliding-window
//   layer the one two before the first shared layer, a global layer the one just before it, as
//   llama.cpp's reuse rule), so the KV spec holds only the other layers (KvSpec::readers says who
//   reads whom) and memory per token counts them alone;
// - sliding-window layers (attention.sliding_window_pattern: one flag per layer) with their own
//   head size (key_length_swa), RoPE dimensions (rope.dimension_count_swa) and base
//   (rope.freq_base_swa), global layers with key_length and the rope_freqs divisors;
// - q and k RMSNorm per head with weights, v RMSNorm per head without, scores not scaled (1);
// - per-layer inputs: a second token embedding (per_layer_token_embd, n_layer x P wide, times
//   sqrt(P)) plus a projection of the scaled embedding (per_layer_model_proj, times 1/sqrt(n_embd),
//   RMSNorm per layer's P by per_layer_proj_norm), the two summed times 1/sqrt(2); after each
//   layer's feed-forward, x += post_norm(proj(gelu(inp_gate(x)) * that layer's P inputs));
// - an optional per-layer output scale (layer_output_scale) and the final logit soft-cap.
// Per layer otherwise as Gemma 3: x += post_attention_norm(attention(attn_norm(x))), then
// x += post_ffw_norm(down(gelu(gate(h)) * up(h))), h = ffn_norm(x); embeddings times sqrt(n_embd).
// Norm weights are used as stored; feed_forward_length may be one width per layer (the shared
// layers' double-wide MLP). A layer with ffn_gate_inp is a mixture of experts: the dense MLP
// (post_ffw_norm_1) plus GeGLU experts of pre_ffw_norm_2(x) (post_ffw_norm_2), the router scoring
// RMSNorm(x) / sqrt(n_embd) * ffn_gate_inp.scale, then post_ffw_norm of the sum. The assistant
// drafter is gemma4_assistant.cc; the gemma4 tokenizer is not read yet.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kv/sliding_window_kind.h"
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/gemma4_hf.h"
#include "model/moe_feed_forward.h"
#include "model/synthetic_model.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

// Workspace buffer ids past the shared decoder's and the mixture's (moe_feed_forward.h).
enum Gemma4Buffer : int {
  kPerLayer = kMoeBufferEnd,  // [n_tokens, n_layer * P]: every layer's per-layer inputs
  kPerLayerTokens,            // [n_tokens, n_layer * P]: the per-layer token embedding
  kPerLayerGate,              // [n_tokens, P]
  kPerLayerSlice,             // [n_tokens, P]: this layer's inputs
  kMoeIn,                     // [n_tokens, n_embd]: pre_ffw_norm_2 of the residual
  kMoeRouterIn,               // [n_tokens, n_embd]: what the router scores
  kMoeOut,                    // [n_tokens, n_embd]: the experts' weighted sum
};

// A mixture-of-experts layer's extra parts (26B-A4B): the dense feed-forward runs beside the
// experts as a shared expert.
struct Gemma4Experts {
  WeightVector pre_norm, post_norm_dense, post_norm_experts;  // pre_ffw_norm_2, post_ffw_norm_1/2
  WeightVector router_scale;                                  // ffn_gate_inp.scale [n_embd]
  MoeFeedForward experts;  // GeGLU experts, softmax router renormalised over the chosen
};

struct Gemma4Layer {
  bool swa = false;
  int head_dim = 0;
  int source = -1;  // the layer whose K/V it reads; itself when it has its own
  RopeParams rope;
  WeightVector attn_norm, post_attn_norm, ffn_norm, post_ffw_norm;  // [n_embd]
  WeightMatrix wq, wk, wv, wo;                                      // wk, wv: own-KV layers
  WeightVector q_norm, k_norm;                                      // [head_dim]
  WeightMatrix gate, up, down;
  WeightMatrix inp_gate, proj;         // [P, n_embd], [n_embd, P]
  WeightVector post_norm;              // [n_embd]
  WeightVector out_scale;              // [1], or empty
  std::unique_ptr<Gemma4Experts> moe;  // a mixture-of-experts layer; null: dense
};

class Gemma4Model final : public Model {
 public:
  Gemma4Model(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load();

  KvSpec kv_spec() const override {
    std::vector<KvGroupSpec> groups(2);  // [0]: global layers, [1]: sliding-window layers
    groups[1].kind = SlidingWindowKind::Make(window_);
    KvSpec spec;
    for (int i = 0; i < config_.n_layers; ++i) {
      const Gemma4Layer& l = layers_[i];
      if (l.source != i) {
        spec.readers.push_back({i, l.source});
        continue;
      }
      KvGroupSpec& g = groups[l.swa ? 1 : 0];
      g.n_kv_heads = config_.n_kv_heads;
      g.head_dim = l.head_dim;
      g.layers.push_back(i);
    }
    for (KvGroupSpec& g : groups) {
      if (!g.layers.empty()) spec.groups.push_back(std::move(g));
    }
    return spec;
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;
  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }

 private:
  Status ReadShape();
  Status LoadLayer(const WeightLoader& r, int il, WeightList& weights);
  // Every layer's per-layer inputs of the batch into kPerLayer.  x: the scaled embeddings.
  const float* PerLayerInputs(const ForwardBatch& batch, const float* x, Workspace& ws) const;
  // x += post_attention_norm(wo · attention), of xn; a shared layer reads its source's cache.
  void Attention(const Gemma4Layer& l, int il, const ForwardBatch& batch, KvCache& kv,
                 const float* xn, float* x, Workspace& ws) const;
  // x += post_ffw_norm(feed-forward of x): the dense GeGLU, and in a mixture-of-experts layer
  // post_ffw_norm_1 of it plus post_ffw_norm_2 of the experts.
  void FeedForward(const Gemma4Layer& l, int n, float* x, Workspace& ws) const;
  // x += post_norm(proj(gelu(inp_gate(x)) * per-layer inputs of layer il)).
  void PerLayerBlock(const Gemma4Layer& l, int il, const float* per_layer, int n, float* x,
                     Workspace& ws) const;

  int window_ = 0;
  int n_per_layer_ = 0;  // P: embedding_length_per_layer_input
  int head_dim_swa_ = 0;
  float final_soft_cap_ = 0.0f;
  OutputHead head_;
  WeightMatrix per_layer_tokens_;      // [n_vocab, n_layer * P]
  WeightMatrix per_layer_model_proj_;  // [n_layer * P, n_embd]
  WeightVector per_layer_proj_norm_;   // [P]
  WeightVector rope_freqs_;            // [head_dim / 2]: global layers' divisors
  WeightVector ones_;                  // [max head_dim]: v's norm has no weight
  std::vector<Gemma4Layer> layers_;
};

Status Gemma4Model::ReadShape() {
  const GgufFile& f = file_;
  const std::string a = config_.arch + ".";
  KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(f, "attention.layer_norm_rms_epsilon"));
  KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(f));
  uint64_t window = 0, per_layer = 0, shared = 0, head_swa = 0, value_swa = 0, rope_swa = 0;
  double base_swa = 0, cap = 0;
  auto uint_key = [&](const char* key, uint64_t fallback, bool required, uint64_t* out) {
    auto v = required ? f.GetUint(a + key) : f.GetUintOr(a + key, fallback);
    if (!v.ok()) return v.status();
    *out = *v;
    return Status::Ok();
  };
  KVSERVE_RETURN_IF_ERROR(uint_key("attention.sliding_window", 0, true, &window));
  KVSERVE_RETURN_IF_ERROR(uint_key("embedding_length_per_layer_input", 0, false, &per_layer));
  KVSERVE_RETURN_IF_ERROR(uint_key("attention.shared_kv_layers", 0, false, &shared));
  KVSERVE_RETURN_IF_ERROR(uint_key("attention.key_length_swa", config_.head_dim, false, &head_swa));
  KVSERVE_RETURN_IF_ERROR(uint_key("attention.value_length_swa", head_swa, false, &value_swa));
  KVSERVE_RETURN_IF_ERROR(
      uint_key("rope.dimension_count_swa", config_.rope_dims, false, &rope_swa));
  for (auto [key, fallback, out] : {std::tuple{"rope.freq_base_swa", 10000.0, &base_swa},
                                    {"final_logit_softcapping", 0.0, &cap}}) {
    auto v = f.GetFloatOr(a + key, fallback);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  auto swa = ReadLayerFlags(f, a + "attention.sliding_window_pattern", config_.n_layers);
  if (!swa.ok()) return swa.status();
  const int n = config_.n_layers;
  const int n_kv = shared < static_cast<uint64_t>(n) ? n - static_cast<int>(shared) : 0;
  if (window == 0 || window > (1u << 24) || head_swa == 0 || head_swa != value_swa ||
      head_swa > 1024 || rope_swa > head_swa || rope_swa % 2 != 0 || per_layer > 65536 ||
      n_kv < 1 || (shared > 0 && (n_kv < 2 || !(*swa)[n_kv - 2] || (*swa)[n_kv - 1]))) {
    return Status::InvalidArgument(
        f.path() + ": Gemma 4 keys out of range: sliding_window " + std::to_string(window) +
        ", key_length_swa " + std::to_string(head_swa) + " (value_length_swa " +
        std::to_string(value_swa) + "), rope.dimension_count_swa " + std::to_string(rope_swa) +
        ", shared_kv_layers " + std::to_string(shared) + " of " + std::to_string(n) +
        " layers (the last two layers with a cache must be sliding-window, then global)");
  }
  window_ = static_cast<int>(window);
  n_per_layer_ = static_cast<int>(per_layer);
  head_dim_swa_ = static_cast<int>(head_swa);
  final_soft_cap_ = static_cast<float>(cap);
  layers_.resize(n);
  for (int i = 0; i < n; ++i) {
    Gemma4Layer& l = layers_[i];
    l.swa = (*swa)[i];
    l.head_dim = l.swa ? head_dim_swa_ : config_.head_dim;
    l.source = i < n_kv ? i : n_kv - (l.swa ? 2 : 1);
    l.rope = {.rope_dims = l.swa ? static_cast<int>(rope_swa) : config_.rope_dims,
              .freq_base = l.swa ? static_cast<float>(base_swa) : config_.rope_freq_base,
              .mode = RopeMode::kSplitHalves,
              .position_scale = l.swa ? 1.0f : config_.rope_position_scale};
  }
  return Status::Ok();
}

Status Gemma4Model::LoadLayer(const WeightLoader& r, int il, WeightList& weights) {
  const ModelConfig& c = config_;
  Gemma4Layer& l = layers_[il];
  const std::string p = "blk." + std::to_string(il) + ".";
  const int q_dim = c.n_heads * l.head_dim, kv_dim = c.n_kv_heads * l.head_dim;
  const int n_ff = c.n_ff_layers.empty() ? c.n_ff : c.n_ff_layers[il];
  for (auto [name, v, n] : {std::tuple{"attn_norm", &l.attn_norm, c.n_embd},
                            {"post_attention_norm", &l.post_attn_norm, c.n_embd},
                            {"ffn_norm", &l.ffn_norm, c.n_embd},
                            {"post_ffw_norm", &l.post_ffw_norm, c.n_embd},
                            {"attn_q_norm", &l.q_norm, l.head_dim}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name + ".weight", n, v));
    weights.vectors.push_back(v);
  }
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate.weight", n_ff, c.n_embd, &l.gate));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", n_ff, c.n_embd, &l.up));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, n_ff, &l.down));
  weights.matrices.insert(weights.matrices.end(), {&l.wq, &l.wo, &l.gate, &l.up, &l.down});
  if (l.source == il) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &l.wk));
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &l.wv));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_k_norm.weight", l.head_dim, &l.k_norm));
    weights.matrices.insert(weights.matrices.end(), {&l.wk, &l.wv});
    weights.vectors.push_back(&l.k_norm);
  }
  if (n_per_layer_ > 0) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "inp_gate.weight", n_per_layer_, c.n_embd, &l.inp_gate));
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "proj.weight", c.n_embd, n_per_layer_, &l.proj));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "post_norm.weight", c.n_embd, &l.post_norm));
    weights.matrices.insert(weights.matrices.end(), {&l.inp_gate, &l.proj});
    weights.vectors.push_back(&l.post_norm);
  }
  if (r.Has(p + "layer_output_scale.weight")) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "layer_output_scale.weight", 1, &l.out_scale));
  }
  if (!r.Has(p + "ffn_gate_inp.weight")) return Status::Ok();
  auto shape = MoeShape::Read(file_, c.arch);
  if (!shape.ok()) return shape.status();
  l.moe = std::make_unique<Gemma4Experts>();
  Gemma4Experts& m = *l.moe;
  for (auto [name, v] : {std::pair{"pre_ffw_norm_2.weight", &m.pre_norm},
                         {"post_ffw_norm_1.weight", &m.post_norm_dense},
                         {"post_ffw_norm_2.weight", &m.post_norm_experts},
                         {"ffn_gate_inp.scale", &m.router_scale}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.n_embd, v));
    weights.vectors.push_back(v);
  }
  return m.experts.Load(r, c, *shape, p, {.activation = MoeActivation::kGeGlu}, weights);
}

Status Gemma4Model::Load() {
  KVSERVE_RETURN_IF_ERROR(ReadShape());
  const ModelConfig& c = config_;
  const WeightLoader r(file_);
  KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
  WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
  KVSERVE_RETURN_IF_ERROR(r.Vector("rope_freqs.weight", c.head_dim / 2, &rope_freqs_));
  ones_.host.assign(std::max(c.head_dim, head_dim_swa_), 1.0f);
  weights.vectors.insert(weights.vectors.end(), {&rope_freqs_, &ones_});
  if (n_per_layer_ > 0) {
    const int wide = n_per_layer_ * c.n_layers;
    KVSERVE_RETURN_IF_ERROR(
        r.Matrix("per_layer_token_embd.weight", c.n_vocab, wide, &per_layer_tokens_));
    KVSERVE_RETURN_IF_ERROR(
        r.Matrix("per_layer_model_proj.weight", wide, c.n_embd, &per_layer_model_proj_));
    KVSERVE_RETURN_IF_ERROR(
        r.Vector("per_layer_proj_norm.weight", n_per_layer_, &per_layer_proj_norm_));
    weights.matrices.push_back(&per_layer_model_proj_);
    weights.vectors.push_back(&per_layer_proj_norm_);
  }
  for (int il = 0; il < c.n_layers; ++il) {
    KVSERVE_RETURN_IF_ERROR(LoadLayer(r, il, weights));
  }
  DeclareWeights(weights);
  // After DeclareWeights: the prepared copies are in place.
  for (Gemma4Layer& l : layers_) {
    if (!l.swa) l.rope.freq_factors = rope_freqs_.data();
  }
  return Status::Ok();
}

const float* Gemma4Model::PerLayerInputs(const ForwardBatch& batch, const float* x,
                                         Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const int wide = n_per_layer_ * c.n_layers;
  float* tokens = ws.Floats(kPerLayerTokens, static_cast<size_t>(n) * wide);
  float* out = ws.Floats(kPerLayer, static_cast<size_t>(n) * wide);
  be.GetRows(per_layer_tokens_, batch.tokens, tokens, ws);
  be.Scale(tokens, n, wide, std::sqrt(static_cast<float>(n_per_layer_)), ws);
  be.Matmul(per_layer_model_proj_, x, n, out, ws);
  be.Scale(out, n, wide, 1.0f / std::sqrt(static_cast<float>(c.n_embd)), ws);
  be.RmsNorm(out, per_layer_proj_norm_.data(), n * c.n_layers, n_per_layer_, c.norm_eps, out, ws);
  be.Add(out, tokens, n, wide, ws);
  be.Scale(out, n, wide, 1.0f / std::sqrt(2.0f), ws);
  return out;
}

void Gemma4Model::Attention(const Gemma4Layer& l, int il, const ForwardBatch& batch, KvCache& kv,
                            const float* xn, float* x, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const int d = l.head_dim, q_dim = c.n_heads * d, kv_dim = c.n_kv_heads * d;
  float* q = ws.Floats(kQ, static_cast<size_t>(n) * q_dim);
  float* attn = ws.Floats(kAttn, static_cast<size_t>(n) * q_dim);
  float* proj = ws.Floats(kProj, static_cast<size_t>(n) * c.n_embd);
  be.Matmul(l.wq, xn, n, q, ws);
  be.RmsNorm(q, l.q_norm.data(), n * c.n_heads, d, c.norm_eps, q, ws);
  be.Rope(q, batch.positions, c.n_heads, d, l.rope, ws);
  if (l.source == il) {
    float* k = ws.Floats(kK, static_cast<size_t>(n) * kv_dim);
    float* v = ws.Floats(kV, static_cast<size_t>(n) * kv_dim);
    be.Matmul(l.wk, xn, n, k, ws);
    be.Matmul(l.wv, xn, n, v, ws);
    be.RmsNorm(k, l.k_norm.data(), n * c.n_kv_heads, d, c.norm_eps, k, ws);
    be.RmsNorm(v, ones_.data(), n * c.n_kv_heads, d, c.norm_eps, v, ws);
    be.Rope(k, batch.positions, c.n_kv_heads, d, l.rope, ws);
    SelfAttention(be, batch, kv.layer(il), q, k, v, kv_dim, c.n_heads, attn, ws, {.scale = 1.0f});
  } else {
    // The source layer ran earlier in this step: its cache already holds this batch's K and V.
    const KvLayerView& source = kv.layer(l.source);
    be.PagedAttention(source, batch.attention(source.group), q, c.n_heads,
                      {.scale = 1.0f, .window = source.attention_window}, attn, ws);
  }
  be.Matmul(l.wo, attn, n, proj, ws);
  be.RmsNorm(proj, l.post_attn_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Gemma4Model::PerLayerBlock(const Gemma4Layer& l, int il, const float* per_layer, int n,
                                float* x, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int p = n_per_layer_;
  float* gate = ws.Floats(kPerLayerGate, static_cast<size_t>(n) * p);
  float* slice = ws.Floats(kPerLayerSlice, static_cast<size_t>(n) * p);
  float* proj = ws.Floats(kProj, static_cast<size_t>(n) * c.n_embd);
  be.CopyRows(per_layer + static_cast<size_t>(il) * p, static_cast<size_t>(p) * c.n_layers, n, p,
              slice, ws);
  be.Matmul(l.inp_gate, x, n, gate, ws);
  be.GeGlu(gate, slice, n, p, ws);  // gelu(gate) * this layer's inputs
  be.Matmul(l.proj, gate, n, proj, ws);
  be.RmsNorm(proj, l.post_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Gemma4Model::FeedForward(const Gemma4Layer& l, int n, float* x, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const size_t rows = static_cast<size_t>(n);
  const int n_ff = static_cast<int>(l.gate.n_out);
  float* xn = ws.Floats(kXn, rows * c.n_embd);
  float* proj = ws.Floats(kProj, rows * c.n_embd);
  float* gate = ws.Floats(kGate, rows * n_ff);
  float* up = ws.Floats(kUp, rows * n_ff);
  be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
  be.Matmul(l.gate, xn, n, gate, ws);
  be.Matmul(l.up, xn, n, up, ws);
  be.GeGlu(gate, up, n, n_ff, ws);
  be.Matmul(l.down, gate, n, proj, ws);
  if (l.moe != nullptr) {
    const Gemma4Experts& m = *l.moe;
    float* in = ws.Floats(kMoeIn, rows * c.n_embd);
    float* router_in = ws.Floats(kMoeRouterIn, rows * c.n_embd);
    float* out = ws.Floats(kMoeOut, rows * c.n_embd);
    be.RmsNorm(proj, m.post_norm_dense.data(), n, c.n_embd, c.norm_eps, proj, ws);
    be.RmsNorm(x, m.pre_norm.data(), n, c.n_embd, c.norm_eps, in, ws);
    // The router scores RMSNorm(x) / sqrt(n_embd) * ffn_gate_inp.scale.
    be.RmsNorm(x, m.router_scale.data(), n, c.n_embd, c.norm_eps, router_in, ws);
    be.Scale(router_in, n, c.n_embd, 1.0f / std::sqrt(static_cast<float>(c.n_embd)), ws);
    std::fill(out, out + rows * c.n_embd, 0.0f);
    m.experts.Forward(be, c.n_embd, in, n, out, ws, router_in);
    be.RmsNorm(out, m.post_norm_experts.data(), n, c.n_embd, c.norm_eps, out, ws);
    be.Add(proj, out, n, c.n_embd, ws);
  }
  be.RmsNorm(proj, l.post_ffw_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Gemma4Model::Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                          float* logits) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  EmbedTokens(be, batch, head_.token_embd, x, ws);
  be.Scale(x, n, c.n_embd, std::sqrt(static_cast<float>(c.n_embd)), ws);
  const float* per_layer = n_per_layer_ > 0 ? PerLayerInputs(batch, x, ws) : nullptr;
  for (int il = 0; il < c.n_layers; ++il) {
    const Gemma4Layer& l = layers_[il];
    be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
    Attention(l, il, batch, kv, xn, x, ws);
    FeedForward(l, n, x, ws);
    if (per_layer != nullptr) PerLayerBlock(l, il, per_layer, n, x, ws);
    if (!l.out_scale.empty()) be.Scale(x, n, c.n_embd, l.out_scale.host[0], ws);
  }
  auto norm = [&](const float* in, int n_rows, float* out) {
    be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
  };
  ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  if (final_soft_cap_ > 0.0f) {
    be.SoftCap(logits, static_cast<int>(batch.logit_rows.size()), c.n_vocab, final_soft_cap_, ws);
  }
}

// A mixture-of-experts layer's tensors (26B-A4B's layout): the router with its input scale, the
// extra norms, fused gate/up experts, down experts and their output scales.
void AddSynthGemma4Experts(const SyntheticShape& s, const std::string& p, SyntheticTensors& out) {
  out.F32Matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert);
  out.Vector(p + "ffn_gate_inp.scale", s.n_embd, SyntheticFill::kOnes);
  for (const char* norm : {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"}) {
    out.Vector(p + norm + ".weight", s.n_embd, SyntheticFill::kOnes);
  }
  out.Experts(p + "ffn_gate_up_exps.weight", s.n_embd, 2 * s.n_ff_expert, s.n_expert);
  out.Experts(p + "ffn_down_exps.weight", s.n_ff_expert, s.n_embd, s.n_expert);
  out.Vector(p + "ffn_down_exps.scale", s.n_expert, SyntheticFill::kOnes);
}

// Random weights (`kvserve synth --arch gemma4`): norms, rope_freqs and output scales 1, tied
// output; the windowed layers' heads half as wide as the global ones' (as E2B's 256 and 512).
void SynthGemma4Tensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  const int64_t wide = static_cast<int64_t>(s.per_layer_input) * s.n_layers;
  if (wide > 0) {
    out.Matrix("per_layer_token_embd.weight", wide, n_vocab);
    out.Matrix("per_layer_model_proj.weight", s.n_embd, wide);
    out.Vector("per_layer_proj_norm.weight", s.per_layer_input, SyntheticFill::kOnes);
  }
  out.Vector("rope_freqs.weight", s.HeadDim() / 2, SyntheticFill::kOnes);
  const int n_kv = s.n_layers - s.shared_kv_layers;
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t d = s.GlobalLayer(i) ? s.HeadDim() : s.HeadDim() / 2;
    out.Vector(p + "attn_norm.weight", s.n_embd, SyntheticFill::kOnes);
    out.Matrix(p + "attn_q.weight", s.n_embd, d * s.n_heads);
    out.Vector(p + "attn_q_norm.weight", d, SyntheticFill::kOnes);
    if (i < n_kv) {
      out.Matrix(p + "attn_k.weight", s.n_embd, d * s.n_kv_heads);
      out.Matrix(p + "attn_v.weight", s.n_embd, d * s.n_kv_heads);
      out.Vector(p + "attn_k_norm.weight", d, SyntheticFill::kOnes);
    }
    out.Matrix(p + "attn_output.weight", d * s.n_heads, s.n_embd);
    for (const char* norm : {"post_attention_norm", "ffn_norm", "post_ffw_norm"}) {
      out.Vector(p + norm + ".weight", s.n_embd, SyntheticFill::kOnes);
    }
    if (wide > 0) out.Vector(p + "post_norm.weight", s.n_embd, SyntheticFill::kOnes);
    const int64_t n_ff = i < n_kv ? s.n_ff : 2 * s.n_ff;  // double-wide in shared layers
    out.Matrix(p + "ffn_gate.weight", s.n_embd, n_ff);
    out.Matrix(p + "ffn_up.weight", s.n_embd, n_ff);
    out.Matrix(p + "ffn_down.weight", n_ff, s.n_embd);
    if (wide > 0) {
      out.Matrix(p + "inp_gate.weight", s.n_embd, s.per_layer_input);
      out.Matrix(p + "proj.weight", s.per_layer_input, s.n_embd);
    }
    out.Vector(p + "layer_output_scale.weight", 1, SyntheticFill::kOnes);
    if (s.n_expert > 0) AddSynthGemma4Experts(s, p, out);
  }
}

void SynthGemma4Metadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  AddSyntheticDecoderMetadata(s, n_vocab, w);
  std::vector<bool> windowed;
  for (int i = 0; i < s.n_layers; ++i) windowed.push_back(!s.GlobalLayer(i));
  w.SetBoolArray("gemma4.attention.sliding_window_pattern", windowed);
  std::vector<int32_t> n_ff;
  for (int i = 0; i < s.n_layers; ++i) {
    n_ff.push_back(i < s.n_layers - s.shared_kv_layers ? s.n_ff : 2 * s.n_ff);
  }
  w.SetInt32Array("gemma4.feed_forward_length", n_ff);  // replaces the single width
  w.SetUint32("gemma4.attention.sliding_window", s.window);
  w.SetUint32("gemma4.attention.key_length_swa", s.HeadDim() / 2);
  w.SetUint32("gemma4.attention.value_length_swa", s.HeadDim() / 2);
  w.SetUint32("gemma4.rope.dimension_count_swa", s.HeadDim() / 2);
  w.SetFloat32("gemma4.rope.freq_base_swa", 10000.0f);
  w.SetUint32("gemma4.attention.shared_kv_layers", s.shared_kv_layers);
  w.SetUint32("gemma4.embedding_length_per_layer_input", s.per_layer_input);
  w.SetFloat32("gemma4.final_logit_softcapping", 30.0f);
  if (s.n_expert > 0) {
    w.SetUint32("gemma4.expert_count", s.n_expert);
    w.SetUint32("gemma4.expert_used_count", s.n_expert_used);
    w.SetUint32("gemma4.expert_feed_forward_length", s.n_ff_expert);
  }
}

const SyntheticRecipe& Gemma4Synthetic() {
  // E2B's shape (its vocabulary, 262,144 tokens of the gemma4 tokenizer, is not on this machine:
  // Llama's SentencePiece one stands in; feed-forward 6144, twice that in the shared layers), and
  // a small one for the reference tests: layers S S G S S G, the last three reading layers 1, 1
  // and 2 with feed-forwards of 512; and a small mixture of experts (26B-A4B's layout: no
  // per-layer inputs, no shared KV, 4 experts of 128 beside the dense 256, 2 used).
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-llama-spm.gguf",
                                      .always_tied = true,
                                      .tensors = &SynthGemma4Tensors,
                                      .metadata = &SynthGemma4Metadata,
                                      .presets = {{"gemma4-e2b",
                                                   {.arch = "gemma4",
                                                    .n_embd = 1536,
                                                    .n_layers = 35,
                                                    .n_heads = 8,
                                                    .n_kv_heads = 1,
                                                    .n_ff = 6144,
                                                    .n_ctx = 131072,
                                                    .norm_eps = 1e-6f,
                                                    .rope_freq_base = 1000000.0f,
                                                    .head_dim = 512,
                                                    .window = 512,
                                                    .swa_period = 5,
                                                    .per_layer_input = 256,
                                                    .shared_kv_layers = 20}},
                                                  {"gemma4-tiny",
                                                   {.arch = "gemma4",
                                                    .n_embd = 256,
                                                    .n_layers = 6,
                                                    .n_heads = 4,
                                                    .n_kv_heads = 2,
                                                    .n_ff = 256,
                                                    .n_ctx = 512,
                                                    .norm_eps = 1e-6f,
                                                    .rope_freq_base = 1000000.0f,
                                                    .head_dim = 128,
                                                    .window = 8,
                                                    .swa_period = 3,
                                                    .per_layer_input = 32,
                                                    .shared_kv_layers = 3}},
                                                  {"gemma4-moe-tiny",
                                                   {.arch = "gemma4",
                                                    .n_embd = 256,
                                                    .n_layers = 3,
                                                    .n_heads = 4,
                                                    .n_kv_heads = 2,
                                                    .n_ff = 256,
                                                    .n_ctx = 512,
                                                    .norm_eps = 1e-6f,
                                                    .rope_freq_base = 1000000.0f,
                                                    .n_expert = 4,
                                                    .n_expert_used = 2,
                                                    .head_dim = 128,
                                                    .window = 8,
                                                    .swa_period = 3,
                                                    .n_ff_expert = 128}}}};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(gemma4) {
  static const Architecture entry{.gguf_name = "gemma4",
                                  .load = &LoadModelOf<Gemma4Model>,
                                  .hf_classes = Gemma4HfClasses(),  // gemma4_hf.h
                                  .synthetic = &Gemma4Synthetic()};
  return entry;
}

}  // namespace kvserve
