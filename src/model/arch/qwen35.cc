// The qwen35 architecture (Qwen3.5 / 3.6 dense), as llama.cpp's qwen35 graph reads its GGUF
// files: a hybrid of Gated DeltaNet linear-attention layers (gated_delta_net_block.h), whose
// memory is a fixed-size recurrent state, and gated full-attention layers
// (gated_attention_block.h), one in every full_attention_interval (qwen35_layout.h). Per layer:
// x += mixer(attn_norm(x)) (qwen35_mixer.h), then x += SwiGLU(post_attention_norm(x)); final
// RMSNorm and output (token_embd when the file has no output.weight). The MTP (nextn) layers
// past the main stack are not read yet.
//
// The KV spec has two groups: the attention layers' full causal K/V, and the recurrent layers'
// states (kv/recurrent_state_kind.h), whose full blocks are checkpoints the prefix cache keeps.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/gated_feed_forward.h"
#include "model/qwen35_hf.h"
#include "model/qwen35_layout.h"
#include "model/qwen35_mixer.h"
#include "model/qwen35_synth.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct Qwen35Layer {
  Qwen35Mixer mixer;  // attn_norm, delta net or gated attention, post_attention_norm
  GatedFeedForward ffn;
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    auto layout = Qwen35Layout::Read(file_, config_);
    if (!layout.ok()) return layout.status();
    layout_ = std::move(layout).value();
    const WeightLoader r(file_);
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, config_));
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    layers_ = std::vector<Qwen35Layer>(config_.n_layers);
    for (int il = 0; il < config_.n_layers; ++il) {
      Qwen35Layer& l = layers_[il];
      KVSERVE_RETURN_IF_ERROR(l.mixer.Load(r, config_, layout_, il, weights));
      const std::string p = "blk." + std::to_string(il) + ".";
      KVSERVE_RETURN_IF_ERROR(l.ffn.Load(r, config_, p, {}, weights));
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  KvSpec kv_spec() const override { return layout_.Spec(config_); }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    for (int il = 0; il < c.n_layers; ++il) {
      const Qwen35Layer& l = layers_[il];
      l.mixer.Forward(be, c, batch, kv.layer(il), layout_.rope, x, xn, proj, ws);
      l.ffn.Forward(be, c, n, xn, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  }

  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }

 private:
  Qwen35Layout layout_;
  OutputHead head_;
  std::vector<Qwen35Layer> layers_;
};

}  // namespace

KVSERVE_ARCHITECTURE(qwen35) {
  static const Architecture entry{.gguf_name = "qwen35",
                                  .load = &LoadModelOf<Qwen35Model>,
                                  .hf_classes = Qwen35HfClasses(),
                                  .synthetic = &Qwen35Synthetic()};
  return entry;
}

}  // namespace kvserve
