// The granite architecture (IBM Granite 3.x dense models): llama's layer (RMSNorm, grouped-query
// attention without biases, RoPE on interleaved pairs, SwiGLU feed-forward, usually tied output)
// with four numbers of its own, as llama.cpp's `granite` reads them:
//   granite.embedding_scale   multiplies the token embeddings (absent or 0: 1);
//   granite.residual_scale    multiplies each sublayer's output before it joins the residual
//                             stream (absent or 0: 1);
//   granite.attention.scale   replaces 1 / sqrt(head_dim) as the attention scores' factor
//                             (absent or 0: 1 / sqrt(head_dim));
//   granite.logit_scale       divides the logits (absent or 0: 1).
// granite.rope.scaling.finetuned false (RoPE off, llama.cpp's switch) is refused.
//
// Hugging Face: GraniteForCausalLM, llama's keys and tensors (q and k rows permuted from
// rotate-half to interleaved pairs) plus embedding_multiplier, residual_multiplier,
// attention_multiplier and logits_scaling, written as the four keys above.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/attention_block.h"
#include "model/decoder_blocks.h"
#include "model/gated_feed_forward.h"
#include "model/hf_families.h"
#include "model/rotary_embedding.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct GraniteScales {
  float embedding = 1.0f;
  float residual = 1.0f;
  float attention = 0.0f;  // 0: 1 / sqrt(head_dim)
  float logit = 1.0f;
};

struct GraniteLayer {
  WeightVector attn_norm, ffn_norm;  // [n_embd]
  AttentionBlock attention;
  GatedFeedForward feed_forward;
};

class GraniteModel final : public Model {
 public:
  GraniteModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_));
    KVSERVE_RETURN_IF_ERROR(ReadScales());
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    for (const char* name : {"blk.0.attn_q.bias", "blk.0.attn_output.bias", "blk.0.ffn_up.bias"}) {
      if (r.Has(name)) {
        return Status::InvalidArgument(file_.path() + ": tensor '" + name +
                                       "': kvserve's granite has no biases");
      }
    }
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    KVSERVE_RETURN_IF_ERROR(rope_.Load(file_, c, RopeMode::kInterleaved, weights));
    layers_.resize(c.n_layers);
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      GraniteLayer& l = layers_[i];
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, {}, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(l.feed_forward.Load(r, c, p, {}, weights));
      weights.vectors.insert(weights.vectors.end(), {&l.attn_norm, &l.ffn_norm});
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    ScaleRows(x, n, c.n_embd, scales_.embedding, ws);
    const RopeParams rope = rope_.params();
    const AttentionCall call{.rope = &rope, .scale = scales_.attention};
    for (int il = 0; il < c.n_layers; ++il) {
      const GraniteLayer& l = layers_[il];
      be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), call, xn, proj, ws);
      ScaleRows(proj, n, c.n_embd, scales_.residual, ws);
      be.Add(x, proj, n, c.n_embd, ws);
      be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.feed_forward.Forward(be, c, n, xn, proj, ws);
      ScaleRows(proj, n, c.n_embd, scales_.residual, ws);
      be.Add(x, proj, n, c.n_embd, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
    ScaleRows(logits, static_cast<int>(batch.logit_rows.size()), c.n_vocab, 1.0f / scales_.logit,
              ws);
  }

 private:
  // granite.embedding_scale, .residual_scale, .attention.scale, .logit_scale; absent or 0: none.
  Status ReadScales() {
    struct Key {
      const char* name;
      float* value;
    };
    for (const Key& key :
         {Key{"embedding_scale", &scales_.embedding}, Key{"residual_scale", &scales_.residual},
          Key{"attention.scale", &scales_.attention}, Key{"logit_scale", &scales_.logit}}) {
      const std::string name = config_.arch + "." + key.name;
      auto value = file_.GetFloatOr(name, 0.0);
      if (!value.ok()) return value.status();
      if (!(*value >= 0.0) || !std::isfinite(*value)) {
        return Status::InvalidArgument(file_.path() + ": key '" + name + "' = " +
                                       std::to_string(*value) + " is not a finite number >= 0");
      }
      if (*value != 0.0) *key.value = static_cast<float>(*value);
    }
    auto rope_on = file_.GetBoolOr(config_.arch + ".rope.scaling.finetuned", true);
    if (!rope_on.ok()) return rope_on.status();
    if (!*rope_on) {
      return Status::InvalidArgument(file_.path() + ": key '" + config_.arch +
                                     ".rope.scaling.finetuned' = false (no RoPE) is not "
                                     "supported");
    }
    return Status::Ok();
  }

  void ScaleRows(float* rows, int n_rows, int width, float factor, Workspace& ws) const {
    if (factor != 1.0f && n_rows > 0) backend_.Scale(rows, n_rows, width, factor, ws);
  }

  GraniteScales scales_;
  RotaryEmbedding rope_;
  OutputHead head_;
  std::vector<GraniteLayer> layers_;
};

Status ReadGraniteConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r, {.rope = kLlama3RopeRules}, c));
  struct Key {
    const char* hf;
    const char* gguf;
  };
  for (const Key& key :
       {Key{"embedding_multiplier", "embedding_scale"},
        Key{"residual_multiplier", "residual_scale"},
        Key{"attention_multiplier", "attention.scale"}, Key{"logits_scaling", "logit_scale"}}) {
    double value = 0;
    KVSERVE_RETURN_IF_ERROR(r.Float(key.hf, &value, false));
    if (value != 0) c.family_floats[key.gguf] = value;
  }
  return Status::Ok();
}

Result<HfMapping> MapGraniteTensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{.layer = LlamaLayerNames(), .permute_qk = true};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteGraniteMetadata(const HfConfig& c, GgufWriter& w) { AddHfDecoderMetadata(c, {}, w); }

}  // namespace

KVSERVE_ARCHITECTURE(granite) {
  static const Architecture entry{
      .gguf_name = "granite",
      .load = &LoadModelOf<GraniteModel>,
      .hf_classes = {{"GraniteForCausalLM", "granite", &ReadGraniteConfig, &MapGraniteTensor,
                      &WriteGraniteMetadata}}};
  return entry;
}

}  // namespace kvserve
