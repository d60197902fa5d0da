#include "model/decoder_blocks.h"

#include <climits>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kv/sliding_window_kind.h"
#include "model/attention_block.h"
#include "model/gated_feed_forward.h"
#include "model/rotary_embedding.h"
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
  const float scale =
      options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  const AttentionParams params{.scale = scale,
                               .window = kv.attention_window,
                               .soft_cap = options.soft_cap,
                               .sinks = options.sinks};
  backend.PagedAttention(kv, batch.attention(kv.group), q, n_heads, params, attn, ws);
}

KvSpec KvSpecByWindow(const ModelConfig& c, const std::vector<int>& windows) {
  std::map<int, KvGroupSpec> by_window;  // window (0 = global) -> group
  for (int i = 0; i < c.n_layers; ++i) {
    const int window = windows[i];
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
  float* normed = batch.final_hidden != nullptr
                      ? batch.final_hidden
                      : ws.Floats(kLogitsIn, static_cast<size_t>(n_out) * n_embd);
  backend.GatherRows(x, n_embd, batch.logit_rows, n_embd, rows, ws);
  norm(rows, n_out, normed);
  backend.Matmul(output, normed, n_out, logits, ws);
}

namespace {

struct LlamaStyleLayer {
  WeightVector attn_norm, ffn_norm;  // [n_embd]
  AttentionBlock attention;
  GatedFeedForward feed_forward;
};

class LlamaStyleModel final : public Model {
 public:
  LlamaStyleModel(GgufFile file, ModelConfig config, const Backend& backend,
                  const LlamaStyleOptions& options)
      : Model(std::move(file), std::move(config), backend), options_(options) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_));
    KVSERVE_RETURN_IF_ERROR(ReadWindow());
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    KVSERVE_RETURN_IF_ERROR(rope_.Load(file_, c, options_.rope_mode, weights));
    const AttentionBlockOptions attention{.qkv_bias = options_.qkv_bias,
                                          .qk_norm = options_.qk_norm,
                                          .fused_qkv = options_.fused_qkv};
    const GatedFeedForwardOptions feed_forward{.activation = GateActivation::kSilu,
                                               .fused_gate_up = options_.fused_gate_up};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaStyleLayer& l = layers_[i];
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, attention, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(l.feed_forward.Load(r, c, p, feed_forward, weights));
      weights.vectors.insert(weights.vectors.end(), {&l.attn_norm, &l.ffn_norm});
    }
    DeclareWeights(weights);
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
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    const RopeParams rope = rope_.params();
    for (int il = 0; il < c.n_layers; ++il) {
      const LlamaStyleLayer& l = layers_[il];
      be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), {.rope = &rope}, xn, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
      be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.feed_forward.Forward(be, c, n, xn, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  // <arch>.attention.sliding_window, where the options read it (Mistral's files).
  Status ReadWindow() {
    if (!options_.sliding_window) return Status::Ok();
    const std::string key = config_.arch + ".attention.sliding_window";
    auto window = file_.GetUintOr(key, 0);
    if (!window.ok()) return window.status();
    if (*window > static_cast<uint64_t>(INT32_MAX)) {
      return Status::InvalidArgument(file_.path() + ": key '" + key +
                                     "' = " + std::to_string(*window) + " is too large");
    }
    window_ = static_cast<int>(*window);
    return Status::Ok();
  }

  LlamaStyleOptions options_;
  int window_ = 0;  // sliding window of every layer; 0 = none
  RotaryEmbedding rope_;
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
