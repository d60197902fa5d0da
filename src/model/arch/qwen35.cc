// The qwen35 architecture (Qwen3.5 / 3.6 dense), as llama.cpp's qwen35 graph reads its GGUF
// files: a hybrid of Gated DeltaNet linear-attention layers (gated_delta_net_block.h), whose
// memory is a fixed-size recurrent state, and gated full-attention layers
// (gated_attention_block.h), one in every full_attention_interval (qwen35_layout.h). Per layer:
// x += mixer(attn_norm(x)) (qwen35_mixer.h), then x += SwiGLU(post_attention_norm(x)); final
// RMSNorm and output (token_embd when the file has no output.weight). The file's MTP (nextn)
// layer, when it has one, drafts (qwen35_nextn.h: NextnDrafter), its cache filled by Forward.
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
#include "model/qwen35_nextn.h"
#include "model/qwen35_synth.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct Qwen35Layer {
  Qwen35Mixer mixer;  // attn_norm, delta net or gated attention, post_attention_norm
  GatedFeedForward ffn;
};

class Qwen35Model final : public Model, public NextnDrafter {
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
    KVSERVE_RETURN_IF_ERROR(ResolveNextnLayers(r, config_, layout_));
    const int n_all = config_.n_layers + layout_.n_nextn;
    layers_ = std::vector<Qwen35Layer>(n_all);
    for (int il = 0; il < n_all; ++il) {
      Qwen35Layer& l = layers_[il];
      KVSERVE_RETURN_IF_ERROR(l.mixer.Load(r, config_, layout_, il, weights));
      const std::string p = "blk." + std::to_string(il) + ".";
      KVSERVE_RETURN_IF_ERROR(l.ffn.Load(r, config_, p, {}, weights));
    }
    if (layout_.n_nextn > 0) {
      KVSERVE_RETURN_IF_ERROR(nextn_.Load(r, config_, layout_, config_.n_layers, head_, weights));
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  KvSpec kv_spec() const override { return layout_.Spec(config_, layout_.n_nextn > 0); }

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
    FinishForward(be, c, batch, head_, layout_.n_nextn > 0 ? &nextn_ : nullptr,
                  layers_.back().mixer, layout_.rope, x, kv, logits, ws);
  }

  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }
  const NextnDrafter* nextn_drafter() const override {
    return layout_.n_nextn > 0 ? this : nullptr;
  }
  int hidden_width() const override { return config_.n_embd; }

  void Draft(const ForwardBatch& batch, const float* hidden, KvCache& kv, Workspace& ws,
             float* logits, float* hidden_next) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    const Qwen35Layer& l = layers_[nextn_.layer()];
    nextn_.Input(be, c, batch, hidden, x, ws);
    l.mixer.Forward(be, c, batch, kv.layer(nextn_.layer()), layout_.rope, x, xn, proj, ws);
    l.ffn.Forward(be, c, n, xn, proj, ws);
    be.Add(x, proj, n, c.n_embd, ws);
    nextn_.Output(be, c, n, x, logits, hidden_next, ws);
  }

 private:
  Qwen35Layout layout_;
  OutputHead head_;
  std::vector<Qwen35Layer> layers_;  // the main stack's, then the MTP layer's
  Qwen35Nextn nextn_;
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
