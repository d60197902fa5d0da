#include "model/gemma_decoder.h"

#include <cmath>
#include <string>
#include <vector>

#include "model/attention_block.h"
#include "model/decoder_blocks.h"
#include "model/gated_feed_forward.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct GemmaLayer {
  WeightVector attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd]
  AttentionBlock attention;
  GatedFeedForward feed_forward;
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
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      GemmaLayer& l = layers_[i];
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, {.qk_norm = options_.qk_norm}, weights));
      KVSERVE_RETURN_IF_ERROR(
          r.Vector(p + "post_attention_norm.weight", c.n_embd, &l.post_attn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(
          l.feed_forward.Load(r, c, p, {.activation = GateActivation::kGelu}, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "post_ffw_norm.weight", c.n_embd, &l.post_ffn_norm));
      weights.vectors.insert(weights.vectors.end(),
                             {&l.attn_norm, &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm});
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  // Local layers of one window form one sliding-window group (ascending windows), the global
  // layers one full causal group.
  KvSpec kv_spec() const override {
    std::vector<int> windows;
    for (const GemmaLayerAttention& a : options_.layers) windows.push_back(a.window);
    return KvSpecByWindow(config_, windows);
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    be.Scale(x, n, c.n_embd, std::sqrt(static_cast<float>(c.n_embd)), ws);
    for (int il = 0; il < c.n_layers; ++il) {
      const GemmaLayer& l = layers_[il];
      const GemmaLayerAttention& a = options_.layers[il];
      be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), {.rope = &a.rope, .soft_cap = a.soft_cap}, xn,
                          proj, ws);
      be.RmsNorm(proj, l.post_attn_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
      be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.feed_forward.Forward(be, c, n, xn, proj, ws);
      be.RmsNorm(proj, l.post_ffn_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
    if (options_.final_soft_cap > 0.0f) {
      be.SoftCap(logits, static_cast<int>(batch.logit_rows.size()), c.n_vocab,
                 options_.final_soft_cap, ws);
    }
  }

 private:
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
