// The qwen35moe architecture (Qwen3.5 / 3.6 mixture of experts, e.g. Qwen3.5-35B-A3B), as
// llama.cpp's qwen35moe graph reads its GGUF files: qwen35's stack (qwen35_layout.h: Gated
// DeltaNet layers and gated full attention every full_attention_interval; qwen35_mixer.h: a
// layer's norm, mixer, residual and post-attention norm) with a mixture in place of each MLP:
//   x += moe(xn) + sigmoid(ffn_gate_inp_shexp · xn) * shared(xn),  xn = post_attention_norm(x)
// moe: a softmax router (ffn_gate_inp), the expert_used_count most probable experts weighted by
// their probabilities renormalised over the chosen (llama.cpp's build_moe_ffn with norm_w true,
// no expert_weights_scale: the file's key is not read), SwiGLU experts without biases
// (moe_feed_forward.h). shared: one SwiGLU MLP of expert_shared_feed_forward_length (default
// feed_forward_length), ffn_{gate,up,down}_shexp; its gate is one scalar per token. The MTP
// (nextn) layers past the main stack are not read yet.
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
#include "model/qwen35_synth.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

enum Qwen35MoeBuffer : int {
  kSharedGate = kGatedAttentionBufferEnd,  // [n_tokens]: ffn_gate_inp_shexp · xn
};

struct Qwen35MoeLayer {
  Qwen35Mixer mixer;         // attn_norm, delta net or gated attention, post_attention_norm
  MoeFeedForward experts;    // routed
  GatedFeedForward shared;   // ffn_*_shexp
  WeightMatrix shared_gate;  // [1, n_embd]: ffn_gate_inp_shexp
};

class Qwen35MoeModel final : public Model {
 public:
  Qwen35MoeModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load();
  KvSpec kv_spec() const override { return layout_.Spec(config_); }
  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;
  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }

 private:
  // Reads the layer's mixture: router and experts, shared expert and its gate.
  Status LoadMixture(const WeightLoader& r, const MoeShape& shape, int n_ff_shared, int il,
                     WeightList& weights);
  // x += moe(xn) + sigmoid(gate · xn) * shared(xn), through `proj`.
  void Mixture(const Qwen35MoeLayer& l, int n, const float* xn, float* x, float* proj,
               Workspace& ws) const;

  Qwen35Layout layout_;
  OutputHead head_;
  std::vector<Qwen35MoeLayer> layers_;
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
  layers_ = std::vector<Qwen35MoeLayer>(config_.n_layers);
  for (int il = 0; il < config_.n_layers; ++il) {
    KVSERVE_RETURN_IF_ERROR(layers_[il].mixer.Load(r, config_, layout_, il, weights));
    KVSERVE_RETURN_IF_ERROR(LoadMixture(r, *shape, static_cast<int>(*n_ff_shared), il, weights));
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
  auto norm = [&](const float* in, int n_rows, float* out) {
    be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
  };
  ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
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
