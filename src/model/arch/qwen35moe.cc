// The qwen35moe architecture (Qwen3.5 / 3.6 mixture of experts, e.g. Qwen3.5-35B-A3B), as
// llama.cpp's qwen35moe graph reads its GGUF files: qwen35's stack (qwen35_layout.h: Gated
// DeltaNet layers and gated full attention every full_attention_interval; qwen35_mixer.h: a
// layer's norm, mixer, residual and post-attention norm) with a mixture in place of each MLP:
//   x += moe(xn) + sigmoid(ffn_gate_inp_shexp · xn) * shared(xn),  xn = post_attention_norm(x)
// moe: a softmax router (ffn_gate_inp), the expert_used_count most probable experts weighted by
// their probabilities renormalised over the chosen (llama.cpp's build_moe_ffn with norm_w true,
// no expert_weights_scale: the file's key is not read), SwiGLU experts without biases
// (moe_feed_forward.h). shared: one SwiGLU MLP of expert_shared_feed_forward_length (default
// feed_forward_length), ffn_{gate,up,down}_shexp; its gate is one scalar per token. The file's
// MTP (nextn) layer, a gated attention layer with the same mixture, drafts (qwen35_nextn.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/gated_feed_forward.h"
#include "model/moe_feed_forward.h"
#include "model/qwen35_hf.h"
#include "model/qwen35_layout.h"
#include "model/qwen35_mixer.h"
#include "model/qwen35_nextn.h"
#include "model/qwen35_synth.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

enum Qwen35MoeBuffer : int {
  kSharedGate = kNextnBufferEnd,  // [n_tokens]: ffn_gate_inp_shexp · xn
};

struct Qwen35MoeLayer {
  Qwen35Mixer mixer;         // attn_norm, delta net or gated attention, post_attention_norm
  MoeFeedForward experts;    // routed
  GatedFeedForward shared;   // ffn_*_shexp
  WeightMatrix shared_gate;  // [1, n_embd]: ffn_gate_inp_shexp
};

class Qwen35MoeModel final : public Model, public NextnDrafter {
 public:
  Qwen35MoeModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load();
  KvSpec kv_spec() const override { return layout_.Spec(config_, layout_.n_nextn > 0); }
  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;
  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }
  const NextnDrafter* nextn_drafter() const override {
    return layout_.n_nextn > 0 ? this : nullptr;
  }
  int hidden_width() const override { return config_.n_embd; }
  void Draft(const ForwardBatch& batch, const float* hidden, KvCache& kv, Workspace& ws,
             float* logits, float* hidden_next) const override;

 private:
  // Reads the layer's mixture: router and experts, shared expert and its gate.
  Status LoadMixture(const WeightLoader& r, const MoeShape& shape, int n_ff_shared, int il,
                     WeightList& weights);
  // x += moe(xn) + sigmoid(gate · xn) * shared(xn), through `proj`.
  void Mixture(const Qwen35MoeLayer& l, int n, const float* xn, float* x, float* proj,
               Workspace& ws) const;

  Qwen35Layout layout_;
  OutputHead head_;
  std::vector<Qwen35MoeLayer> layers_;  // the main stack's, then the MTP layer's
  Qwen35Nextn nextn_;
};

Status Qwen35MoeModel::LoadMixture(const WeightLoader& r, const MoeShape& shape, int n_ff_shared,
                                   int il, WeightList& weights) {
  Qwen35MoeLayer& l = layers_[il];
  const std::string p = "blk." + std::to_string(il) + ".";
  KVSERVE_RETURN_IF_ERROR(l.experts.Load(r, config_, shape, p, {}, weights));
  KVSERVE_RETURN_IF_ERROR(
      l.shared.Load(r, config_, p, {.name_suffix = "_shexp", .n_ff = n_ff_shared}, weights));
  KVSERVE_RETURN_IF_ERROR(
      r.RowMatrix(p + "ffn_gate_inp_shexp.weight", config_.n_embd, &l.shared_gate));
  weights.matrices.push_back(&l.shared_gate);
  return Status::Ok();
}

Status Qwen35MoeModel::Load() {
  auto layout = Qwen35Layout::Read(file_, config_);
  if (!layout.ok()) return layout.status();
  layout_ = std::move(layout).value();
  auto shape = MoeShape::Read(file_, config_.arch);
  if (!shape.ok()) return shape.status();
  auto n_ff_shared =
      file_.GetUintOr(config_.arch + ".expert_shared_feed_forward_length", config_.n_ff);
  if (!n_ff_shared.ok()) return n_ff_shared.status();
  if (*n_ff_shared == 0 || *n_ff_shared > (1u << 20)) {
    return Status::InvalidArgument(file_.path() + ": " + config_.arch +
                                   ".expert_shared_feed_forward_length is " +
                                   std::to_string(*n_ff_shared) + " (expected 1 to 1048576)");
  }
  const WeightLoader r(file_);
  KVSERVE_RETURN_IF_ERROR(head_.Load(r, config_));
  WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
  KVSERVE_RETURN_IF_ERROR(ResolveNextnLayers(r, config_, layout_));
  const int n_all = config_.n_layers + layout_.n_nextn;
  layers_ = std::vector<Qwen35MoeLayer>(n_all);
  for (int il = 0; il < n_all; ++il) {
    KVSERVE_RETURN_IF_ERROR(layers_[il].mixer.Load(r, config_, layout_, il, weights));
    KVSERVE_RETURN_IF_ERROR(LoadMixture(r, *shape, static_cast<int>(*n_ff_shared), il, weights));
  }
  if (layout_.n_nextn > 0) {
    KVSERVE_RETURN_IF_ERROR(nextn_.Load(r, config_, layout_, config_.n_layers, head_, weights));
  }
  DeclareWeights(weights);
  return Status::Ok();
}

// In llama.cpp's order: the gated shared expert plus the experts' weighted sum, then the residual.
void Qwen35MoeModel::Mixture(const Qwen35MoeLayer& l, int n, const float* xn, float* x, float* proj,
                             Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  float* gate = ws.Floats(kSharedGate, static_cast<size_t>(n));
  l.shared.Forward(be, c, n, xn, proj, ws);
  be.Matmul(l.shared_gate, xn, n, gate, ws);
  be.SigmoidScaleRows(proj, gate, n, c.n_embd, ws);
  l.experts.Forward(be, c.n_embd, xn, n, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Qwen35MoeModel::Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                             float* logits) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  EmbedTokens(be, batch, head_.token_embd, x, ws);
  for (int il = 0; il < c.n_layers; ++il) {
    const Qwen35MoeLayer& l = layers_[il];
    l.mixer.Forward(be, c, batch, kv.layer(il), layout_.rope, x, xn, proj, ws);
    Mixture(l, n, xn, x, proj, ws);
  }
  FinishForward(be, c, batch, head_, layout_.n_nextn > 0 ? &nextn_ : nullptr, layers_.back().mixer,
                layout_.rope, x, kv, logits, ws);
}

void Qwen35MoeModel::Draft(const ForwardBatch& batch, const float* hidden, KvCache& kv,
                           Workspace& ws, float* logits, float* hidden_next) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  const Qwen35MoeLayer& l = layers_[nextn_.layer()];
  nextn_.Input(be, c, batch, hidden, x, ws);
  l.mixer.Forward(be, c, batch, kv.layer(nextn_.layer()), layout_.rope, x, xn, proj, ws);
  Mixture(l, n, xn, x, proj, ws);
  nextn_.Output(be, c, n, x, logits, hidden_next, ws);
}

}  // namespace

KVSERVE_ARCHITECTURE(qwen35moe) {
  static const Architecture entry{.gguf_name = "qwen35moe",
                                  .load = &LoadModelOf<Qwen35MoeModel>,
                                  .hf_classes = Qwen35MoeHfClasses(),
                                  .synthetic = &Qwen35MoeSynthetic()};
  return entry;
}

}  // namespace kvserve
