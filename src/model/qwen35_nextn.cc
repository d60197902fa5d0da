#include "model/qwen35_nextn.h"

#include <numeric>
#include <tuple>
#include <vector>

#include "model/gated_delta_net_block.h"

namespace kvserve {

Status Qwen35Nextn::Load(const WeightLoader& r, const ModelConfig& c, const Qwen35Layout& layout,
                         int il, const OutputHead& head, WeightList& weights) {
  layer_ = il;
  head_ = &head;
  for (int i = 0; i < c.n_layers; ++i) {
    if (layout.IsRecurrent(i)) {
      state_layer_ = i;
      break;
    }
  }
  if (state_layer_ < 0) {
    return Status::InvalidArgument(
        c.arch + ": an MTP layer needs a recurrent layer's state to keep its hidden row");
  }
  state_offset_ = layout.delta.state_floats();
  const std::string p = "blk." + std::to_string(il) + ".nextn.";
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "eh_proj.weight", c.n_embd, 2 * c.n_embd, &eh_proj_));
  weights.matrices.push_back(&eh_proj_);
  for (auto [name, v] : {std::pair{"enorm.weight", &enorm_}, {"hnorm.weight", &hnorm_}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.n_embd, v));
    weights.vectors.push_back(v);
  }
  head_norm_ = &head.norm;
  if (r.Has(p + "shared_head_norm.weight")) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "shared_head_norm.weight", c.n_embd, &shared_head_norm_));
    weights.vectors.push_back(&shared_head_norm_);
    head_norm_ = &shared_head_norm_;
  }
  for (const char* name : {"embed_tokens.weight", "shared_head_head.weight"}) {
    if (r.Has(p + name)) {
      return Status::InvalidArgument(p + name + ": an MTP layer with its own " + name +
                                     " is not supported (Qwen3.5 files share the target's)");
    }
  }
  return Status::Ok();
}

void Qwen35Nextn::CarryHidden(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                              KvCache& kv, const float* hidden, float* prev, Workspace& ws) const {
  const size_t width = static_cast<size_t>(c.n_embd);
  const std::vector<float> zeros(width, 0.0f);
  for (const RecurrentRun& run : RecurrentRuns(batch, kv.layer(state_layer_), state_offset_)) {
    // Read the state before writing it: a decode step's run reads and writes one block.
    be.CopyRows(run.from != nullptr ? run.from : zeros.data(), width, 1, c.n_embd,
                prev + run.row_begin * width, ws);
    if (run.row_end - run.row_begin > 1) {
      be.CopyRows(hidden + run.row_begin * width, width, run.row_end - run.row_begin - 1, c.n_embd,
                  prev + (run.row_begin + 1) * width, ws);
    }
    be.CopyRows(hidden + (run.row_end - 1) * width, width, 1, c.n_embd, run.to, ws);
  }
}

void Qwen35Nextn::Input(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                        const float* hidden, float* y, Workspace& ws) const {
  const int n = batch.n_tokens();
  const size_t width = static_cast<size_t>(c.n_embd), rows = static_cast<size_t>(n);
  float* part = ws.Floats(kNextnEmbd, rows * width);
  float* joined = ws.Floats(kNextnJoined, rows * 2 * width);
  std::vector<int32_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  EmbedTokens(be, batch, head_->token_embd, part, ws);
  be.RmsNorm(part, enorm_.data(), n, c.n_embd, c.norm_eps, part, ws);
  be.ScatterRows(part, c.n_embd, all, 2 * width, joined, ws);
  be.RmsNorm(hidden, hnorm_.data(), n, c.n_embd, c.norm_eps, part, ws);
  be.ScatterRows(part, c.n_embd, all, 2 * width, joined + width, ws);
  be.Matmul(eh_proj_, joined, n, y, ws);
}

void Qwen35Nextn::CatchUp(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                          KvCache& kv, const Qwen35Mixer& mixer, const RopeParams& rope,
                          const float* hidden, Workspace& ws) const {
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  float* prev = ws.Floats(kNextnPrev, static_cast<size_t>(n) * c.n_embd);
  CarryHidden(be, c, batch, kv, hidden, prev, ws);
  Input(be, c, batch, prev, x, ws);
  mixer.StoreKv(be, c, batch, kv.layer(layer_), rope, x, xn, ws);
}

void Qwen35Nextn::Output(const Backend& be, const ModelConfig& c, int n, const float* y,
                         float* logits, float* hidden_next, Workspace& ws) const {
  be.RmsNorm(y, head_norm_->data(), n, c.n_embd, c.norm_eps, hidden_next, ws);
  be.Matmul(*head_->output, hidden_next, n, logits, ws);
}

Status ResolveNextnLayers(const WeightLoader& r, const ModelConfig& c, Qwen35Layout& layout) {
  if (layout.n_nextn > 1) {
    return Status::InvalidArgument(c.arch + ".nextn_predict_layers is " +
                                   std::to_string(layout.n_nextn) +
                                   ": kvserve runs one MTP layer, as llama.cpp does");
  }
  if (layout.n_nextn == 1 &&
      !r.Has("blk." + std::to_string(c.n_layers) + ".nextn.eh_proj.weight")) {
    layout.n_nextn = 0;
  }
  return Status::Ok();
}

void FinishForward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                   const OutputHead& head, const Qwen35Nextn* nextn, const Qwen35Mixer& mixer,
                   const RopeParams& rope, const float* x, KvCache& kv, float* logits,
                   Workspace& ws) {
  const int n = batch.n_tokens();
  if (nextn == nullptr) {
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head.output, logits, ws);
    return;
  }
  float* hidden = ws.Floats(kNextnHidden, static_cast<size_t>(n) * c.n_embd);
  be.RmsNorm(x, head.norm.data(), n, c.n_embd, c.norm_eps, hidden, ws);
  auto normed = [&](const float* in, int n_rows, float* out) {
    be.CopyRows(in, c.n_embd, n_rows, c.n_embd, out, ws);
  };
  ProjectLogits(be, batch, hidden, c.n_embd, normed, *head.output, logits, ws);
  nextn->CatchUp(be, c, batch, kv, mixer, rope, hidden, ws);
}

}  // namespace kvserve
