// The qwen35 architecture (Qwen3.5 / 3.6 dense), as llama.cpp's qwen35 graph reads its GGUF
// files: a hybrid of Gated DeltaNet linear-attention layers (gated_delta_net_block.h), whose
// memory is a fixed-size recurrent state, and gated full-attention layers, one in every
// full_attention_interval (attention.recurrent_layers where the file lists them). Per layer:
// x += mixer(attn_norm(x)), then x += SwiGLU(post_attention_norm(x)); final RMSNorm and output
// (token_embd when the file has no output.weight). The attention layers: attn_q gives per head q
// then a gate; q and k RMSNorm per head; RoPE over the first rope.dimension_count dimensions of
// each head on split halves (llama.cpp's interleaved M-RoPE, whose sections all see the same
// position for text); scores times 1/sqrt(head_dim); the output times sigmoid(gate), then
// attn_output. Norm weights are used as stored. The MTP (nextn) layers past block_count are not
// read yet.
//
// The KV spec has two groups: the attention layers' full causal K/V, and the recurrent layers'
// states (kv/recurrent_state_kind.h), whose full blocks are checkpoints the prefix cache keeps.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/gated_delta_net_block.h"
#include "model/gated_feed_forward.h"
#include "model/qwen35_hf.h"
#include "model/qwen35_synth.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

enum Qwen35Buffer : int {
  kQueryGate = kDeltaNetBufferEnd,  // [n_tokens, n_heads * 2 * head_dim]: attn_q · xn
};

struct Qwen35Layer {
  bool recurrent = false;
  WeightVector attn_norm, post_attn_norm;  // [n_embd]
  GatedDeltaNetBlock delta;                // recurrent layers
  WeightMatrix wq, wk, wv, wo;             // attention layers; wq: [2 * q_dim, n_embd]
  WeightVector q_norm, k_norm;             // [head_dim]
  GatedFeedForward ffn;
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load();

  KvSpec kv_spec() const override {
    std::vector<int> attention, recurrent;
    for (int i = 0; i < config_.n_layers; ++i) {
      (layers_[i].recurrent ? recurrent : attention).push_back(i);
    }
    KvSpec spec;
    if (!attention.empty()) {
      spec.groups.push_back(KvGroupSpec{
          .layers = attention, .n_kv_heads = config_.n_kv_heads, .head_dim = config_.head_dim});
    }
    if (!recurrent.empty()) spec.groups.push_back(DeltaNetGroup(delta_, std::move(recurrent)));
    return spec;
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;
  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }

 private:
  Status ReadShape();
  Status LoadLayer(const WeightLoader& r, int il, WeightList& weights);
  // out = attn_output · (attention * sigmoid(gate)) of xn.
  void Attention(const Qwen35Layer& l, const ForwardBatch& batch, const KvLayerView& kv,
                 const float* xn, float* out, Workspace& ws) const;

  DeltaNetShape delta_;
  RopeParams rope_;
  OutputHead head_;
  std::vector<Qwen35Layer> layers_;
};

// Whether M-RoPE `sections` rotate every pair of the first rope_dims dimensions by one of the
// first three positions (which text tokens set alike); llama.cpp's interleaved layout (ggml's
// imrope) gives pair i sector i % Σ sections, by sector % 3 the t, h or w position while within
// 3 * that section, else the fourth position (0 for text: not rotated).
bool SectionsRotateAlike(const std::vector<int64_t>& sections, int rope_dims) {
  int64_t total = 0;
  for (int64_t s : sections) total += s;
  if (total <= 0) return false;
  for (int i = 0; i < rope_dims / 2; ++i) {
    const int64_t sector = i % total;
    const int64_t by = sector % 3;  // t, h or w
    if (sector >= 3 * sections[by]) return false;
  }
  return true;
}

Status Qwen35Model::ReadShape() {
  const GgufFile& f = file_;
  const std::string a = config_.arch + ".";
  KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(f, "attention.layer_norm_rms_epsilon"));
  KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(f));
  auto delta = DeltaNetShape::Read(f, config_.arch);
  if (!delta.ok()) return delta.status();
  delta_ = *delta;
  auto interval = f.GetUintOr(a + "full_attention_interval", 4);
  if (!interval.ok()) return interval.status();
  if (*interval == 0) {
    return Status::InvalidArgument(f.path() + ": " + a + "full_attention_interval is 0");
  }
  // block_count counts the MTP layers that follow the main stack; they do not run here.
  auto nextn = f.GetUintOr(a + "nextn_predict_layers", 0);
  if (!nextn.ok()) return nextn.status();
  const int n_all = config_.n_layers;
  if (*nextn >= static_cast<uint64_t>(n_all)) {
    return Status::InvalidArgument(f.path() + ": " + a + "nextn_predict_layers " +
                                   std::to_string(*nextn) + " leaves none of the " +
                                   std::to_string(n_all) + " layers");
  }
  const int n = n_all - static_cast<int>(*nextn);
  config_.n_layers = n;
  std::vector<bool> recurrent(n);
  for (int i = 0; i < n; ++i) recurrent[i] = (i + 1) % *interval != 0;
  if (f.Find(a + "attention.recurrent_layers") != nullptr) {
    auto flags = ReadLayerFlags(f, a + "attention.recurrent_layers", n_all);
    if (!flags.ok()) return flags.status();
    recurrent.assign(flags->begin(), flags->begin() + n);
  }
  std::vector<int64_t> sections = {0, 0, 0, 0};
  if (f.Find(a + "rope.dimension_sections") != nullptr) {
    auto v = f.GetIntArray(a + "rope.dimension_sections");
    if (!v.ok()) return v.status();
    sections = *v;
    sections.resize(4, 0);
  }
  const int rope_dims = config_.rope_dims;
  if (rope_dims <= 0 || rope_dims > config_.head_dim || rope_dims % 2 != 0 ||
      (f.Find(a + "rope.dimension_sections") != nullptr &&
       !SectionsRotateAlike(sections, rope_dims))) {
    return Status::InvalidArgument(
        f.path() + ": " + a + "rope.dimension_count " + std::to_string(rope_dims) +
        " with rope.dimension_sections [" + std::to_string(sections[0]) + ", " +
        std::to_string(sections[1]) + ", " + std::to_string(sections[2]) + ", " +
        std::to_string(sections[3]) + "] (head " + std::to_string(config_.head_dim) +
        "): kvserve rotates text positions only, every pair by the same position");
  }
  rope_ = {.rope_dims = rope_dims,
           .freq_base = config_.rope_freq_base,
           .mode = RopeMode::kSplitHalves,
           .position_scale = config_.rope_position_scale};
  layers_ = std::vector<Qwen35Layer>(n);
  for (int i = 0; i < n; ++i) layers_[i].recurrent = recurrent[i];
  return Status::Ok();
}

Status Qwen35Model::LoadLayer(const WeightLoader& r, int il, WeightList& weights) {
  const ModelConfig& c = config_;
  Qwen35Layer& l = layers_[il];
  const std::string p = "blk." + std::to_string(il) + ".";
  for (auto [name, v] : {std::pair{"attn_norm.weight", &l.attn_norm},
                         {"post_attention_norm.weight", &l.post_attn_norm}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.n_embd, v));
    weights.vectors.push_back(v);
  }
  KVSERVE_RETURN_IF_ERROR(l.ffn.Load(r, c, p, {}, weights));
  if (l.recurrent) return l.delta.Load(r, c, delta_, p, weights);
  const int q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  for (auto [name, m, n_out, n_in] : {std::tuple{"attn_q.weight", &l.wq, 2 * q_dim, c.n_embd},
                                      {"attn_k.weight", &l.wk, kv_dim, c.n_embd},
                                      {"attn_v.weight", &l.wv, kv_dim, c.n_embd},
                                      {"attn_output.weight", &l.wo, c.n_embd, q_dim}}) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(p + name, n_out, n_in, m));
    weights.matrices.push_back(m);
  }
  for (auto [name, v] :
       {std::pair{"attn_q_norm.weight", &l.q_norm}, {"attn_k_norm.weight", &l.k_norm}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name, c.head_dim, v));
    weights.vectors.push_back(v);
  }
  return Status::Ok();
}

Status Qwen35Model::Load() {
  KVSERVE_RETURN_IF_ERROR(ReadShape());
  const WeightLoader r(file_);
  KVSERVE_RETURN_IF_ERROR(head_.Load(r, config_));
  WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
  for (int il = 0; il < config_.n_layers; ++il) {
    KVSERVE_RETURN_IF_ERROR(LoadLayer(r, il, weights));
  }
  DeclareWeights(weights);
  return Status::Ok();
}

void Qwen35Model::Attention(const Qwen35Layer& l, const ForwardBatch& batch, const KvLayerView& kv,
                            const float* xn, float* out, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens(), d = c.head_dim;
  const int q_dim = c.n_heads * d, kv_dim = c.n_kv_heads * d;
  const size_t rows = static_cast<size_t>(n);
  float* qg = ws.Floats(kQueryGate, rows * 2 * q_dim);
  float* q = ws.Floats(kQ, rows * q_dim);
  float* k = ws.Floats(kK, rows * kv_dim);
  float* v = ws.Floats(kV, rows * kv_dim);
  float* attn = ws.Floats(kAttn, rows * q_dim);
  be.Matmul(l.wq, xn, n, qg, ws);
  be.CopyRows(qg, 2 * d, n * c.n_heads, d, q);  // each head's q; its gate follows it
  be.Matmul(l.wk, xn, n, k, ws);
  be.Matmul(l.wv, xn, n, v, ws);
  be.RmsNorm(q, l.q_norm.data(), n * c.n_heads, d, c.norm_eps, q, ws);
  be.RmsNorm(k, l.k_norm.data(), n * c.n_kv_heads, d, c.norm_eps, k, ws);
  be.Rope(q, batch.positions, c.n_heads, d, rope_, ws);
  be.Rope(k, batch.positions, c.n_kv_heads, d, rope_, ws);
  SelfAttention(be, batch, kv, q, k, v, kv_dim, c.n_heads, attn, ws);
  be.SigmoidGate(attn, qg + d, 2 * d, n * c.n_heads, d, ws);
  be.Matmul(l.wo, attn, n, out, ws);
}

void Qwen35Model::Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                          float* logits) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  EmbedTokens(be, batch, head_.token_embd, x, ws);
  for (int il = 0; il < c.n_layers; ++il) {
    const Qwen35Layer& l = layers_[il];
    be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
    if (l.recurrent) {
      l.delta.Forward(be, c, batch, kv.layer(il), xn, proj, ws);
    } else {
      Attention(l, batch, kv.layer(il), xn, proj, ws);
    }
    be.Add(x, proj, n, c.n_embd, ws);
    be.RmsNorm(x, l.post_attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
    l.ffn.Forward(be, c, n, xn, proj, ws);
    be.Add(x, proj, n, c.n_embd, ws);
  }
  auto norm = [&](const float* in, int n_rows, float* out) {
    be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
  };
  ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
}

}  // namespace

KVSERVE_ARCHITECTURE(qwen35) {
  static const Architecture entry{.gguf_name = "qwen35",
                                  .load = &LoadModelOf<Qwen35Model>,
                                  .hf_classes = Qwen35HfClasses(),
                                  .synthetic = &Qwen35Synthetic()};
  return entry;
}

}  // namespace kvserve
