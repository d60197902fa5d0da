// The gemma4-assistant architecture: Gemma 4's drafter (the "-assistant" checkpoints published
// beside E2B, E4B, 26B-A4B and 31B), as llama.cpp's gemma4-assistant graph reads its GGUF files.
// It keeps no cache and cannot run alone (Model::hidden_state_drafter): each drafting step of a
// sequence reads
//   x = concat(target token_embd[token] * sqrt(n_target), h) -> nextn.pre_projection  [n_embd]
// where h is the target's final hidden row (after its output norm) for the first step and the
// assistant's own nextn.post_projection of its normed output for the next ones. Per layer (q
// only: every layer attends to the target's cache, the windowed ones to the cache the target's
// second-to-last layer reads, the global ones to the last layer's, as llama.cpp shares them):
//   x += post_attention_norm(wo · attention(rope(q_norm(wq · attn_norm(x)))))   scores scaled 1
//   x += post_ffw_norm(down(gelu(gate(h)) * up(h))), h = ffn_norm(x);  x *= layer_output_scale
// then output_norm, logits by its own (tied) token_embd. Every token drafted in a step sits at
// the position of the sequence's pending token (llama.cpp and transformers do the same), and
// attends to the target's positions before it (the pending token's K/V are not stored yet).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/gated_feed_forward.h"
#include "model/gemma4_hf.h"
#include "model/hidden_state_drafter.h"
#include "model/synthetic_model.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

// Workspace buffer ids past the shared decoder's.
enum AssistantBuffer : int {
  kTargetEmbd = kLogitsIn + 1,  // [n, n_target]: the tokens' rows of the target's embedding
  kJoined,                      // [n, 2 * n_target]: those, then the hidden rows
};

struct AssistantLayer {
  bool swa = false;
  int head_dim = 0;
  RopeParams rope;
  WeightVector attn_norm, q_norm, post_attn_norm, ffn_norm, post_ffw_norm;  // [n_embd], [head]
  WeightVector out_scale;                                                   // [1]
  WeightMatrix wq, wo;
  GatedFeedForward feed_forward;  // GeGLU
};

class Gemma4AssistantModel final : public Model, public HiddenStateDrafter {
 public:
  Gemma4AssistantModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load();

  KvSpec kv_spec() const override { return KvSpec{}; }  // none of its own
  void Forward(const ForwardBatch&, KvCache&, Workspace&, float*) const override {
    std::abort();  // never: the CLI and the engine refuse a drafter as the model to run
  }
  const HiddenStateDrafter* hidden_state_drafter() const override { return this; }
  const WeightMatrix* token_embedding() const override { return &head_.token_embd; }

  Result<DraftTarget> Bind(const Model& target) const override;
  void Draft(const DraftTarget& target, const ForwardBatch& batch, const float* hidden, KvCache& kv,
             Workspace& ws, float* logits, float* hidden_next) const override;

 private:
  Status ReadShape();
  Status LoadLayer(const WeightLoader& r, int il, WeightList& weights);
  // The cache layer of `target` that target layer `layer` reads (itself, or its source), checked
  // against this model's heads; `what` names it in errors.
  Result<int> CacheLayer(const KvSpec& spec, int layer, bool swa, const std::string& what) const;
  // x += post_attention_norm(wo · attention over the target's cache of xn); `before`: each
  // row's position minus one.
  void Attention(const AssistantLayer& l, const DraftTarget& target, const ForwardBatch& batch,
                 std::span<const int32_t> before, KvCache& kv, const float* xn, float* x,
                 Workspace& ws) const;
  void FeedForward(const AssistantLayer& l, int n, float* x, Workspace& ws) const;

  int window_ = 0;
  int n_target_ = 0;  // embedding_length_out: the target's hidden width
  int head_dim_swa_ = 0;
  OutputHead head_;
  WeightMatrix pre_proj_;   // [n_embd, 2 * n_target]
  WeightMatrix post_proj_;  // [n_target, n_embd]
  WeightVector rope_freqs_;
  std::vector<AssistantLayer> layers_;
};

Status Gemma4AssistantModel::ReadShape() {
  const GgufFile& f = file_;
  const std::string a = config_.arch + ".";
  KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(f, "attention.layer_norm_rms_epsilon"));
  KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(f));
  uint64_t window = 0, n_target = 0, head_swa = 0, value_swa = 0, rope_swa = 0, nextn = 0;
  for (auto [key, fallback, out] :
       {std::tuple{"attention.sliding_window", uint64_t{0}, &window},
        {"embedding_length_out", uint64_t{0}, &n_target},
        {"attention.key_length_swa", uint64_t(config_.head_dim), &head_swa},
        {"attention.value_length_swa", uint64_t{0}, &value_swa},
        {"rope.dimension_count_swa", uint64_t(config_.rope_dims), &rope_swa},
        {"nextn_predict_layers", uint64_t(config_.n_layers), &nextn}}) {
    auto v = f.GetUintOr(a + key, fallback);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (value_swa == 0) value_swa = head_swa;
  auto base_swa = f.GetFloatOr(a + "rope.freq_base_swa", 10000.0);
  if (!base_swa.ok()) return base_swa.status();
  auto swa = ReadLayerFlags(f, a + "attention.sliding_window_pattern", config_.n_layers);
  if (!swa.ok()) return swa.status();
  if (window < 2 || window > (1u << 24) || n_target == 0 || n_target > (1u << 20) ||
      n_target == static_cast<uint64_t>(config_.n_embd) || head_swa == 0 || head_swa > 1024 ||
      head_swa != value_swa || rope_swa > head_swa || rope_swa % 2 != 0 ||
      nextn != static_cast<uint64_t>(config_.n_layers)) {
    return Status::InvalidArgument(
        f.path() + ": Gemma 4 assistant keys out of range: sliding_window " +
        std::to_string(window) + ", embedding_length_out " + std::to_string(n_target) +
        " (the target's width, not embedding_length " + std::to_string(config_.n_embd) +
        "), key_length_swa " + std::to_string(head_swa) + " (value_length_swa " +
        std::to_string(value_swa) + "), rope.dimension_count_swa " + std::to_string(rope_swa) +
        ", nextn_predict_layers " + std::to_string(nextn) + " (must equal block_count " +
        std::to_string(config_.n_layers) + ")");
  }
  window_ = static_cast<int>(window);
  n_target_ = static_cast<int>(n_target);
  head_dim_swa_ = static_cast<int>(head_swa);
  layers_.resize(config_.n_layers);
  for (int i = 0; i < config_.n_layers; ++i) {
    AssistantLayer& l = layers_[i];
    l.swa = (*swa)[i];
    l.head_dim = l.swa ? head_dim_swa_ : config_.head_dim;
    l.rope = {.rope_dims = l.swa ? static_cast<int>(rope_swa) : config_.rope_dims,
              .freq_base = l.swa ? static_cast<float>(*base_swa) : config_.rope_freq_base,
              .mode = RopeMode::kSplitHalves,
              .position_scale = l.swa ? 1.0f : config_.rope_position_scale};
  }
  return Status::Ok();
}

Status Gemma4AssistantModel::LoadLayer(const WeightLoader& r, int il, WeightList& weights) {
  const ModelConfig& c = config_;
  AssistantLayer& l = layers_[il];
  const std::string p = "blk." + std::to_string(il) + ".";
  const int q_dim = c.n_heads * l.head_dim;
  for (auto [name, v, n] : {std::tuple{"attn_norm", &l.attn_norm, c.n_embd},
                            {"attn_q_norm", &l.q_norm, l.head_dim},
                            {"post_attention_norm", &l.post_attn_norm, c.n_embd},
                            {"ffn_norm", &l.ffn_norm, c.n_embd},
                            {"post_ffw_norm", &l.post_ffw_norm, c.n_embd},
                            {"layer_output_scale", &l.out_scale, 1}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + name + ".weight", n, v));
    weights.vectors.push_back(v);
  }
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l.wq));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l.wo));
  weights.matrices.insert(weights.matrices.end(), {&l.wq, &l.wo});
  return l.feed_forward.Load(r, c, p, {.activation = GateActivation::kGelu}, weights);
}

Status Gemma4AssistantModel::Load() {
  KVSERVE_RETURN_IF_ERROR(ReadShape());
  const ModelConfig& c = config_;
  const WeightLoader r(file_);
  KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
  KVSERVE_RETURN_IF_ERROR(
      r.Matrix("nextn.pre_projection.weight", c.n_embd, 2 * n_target_, &pre_proj_));
  KVSERVE_RETURN_IF_ERROR(
      r.Matrix("nextn.post_projection.weight", n_target_, c.n_embd, &post_proj_));
  KVSERVE_RETURN_IF_ERROR(r.Vector("rope_freqs.weight", c.head_dim / 2, &rope_freqs_));
  WeightList weights{.matrices = {head_.output, &pre_proj_, &post_proj_},
                     .vectors = {&head_.norm, &rope_freqs_}};
  for (int il = 0; il < c.n_layers; ++il) {
    KVSERVE_RETURN_IF_ERROR(LoadLayer(r, il, weights));
  }
  DeclareWeights(weights);
  for (AssistantLayer& l : layers_) {
    if (!l.swa) l.rope.freq_factors = rope_freqs_.data();  // after DeclareWeights: prepared
  }
  return Status::Ok();
}

Result<int> Gemma4AssistantModel::CacheLayer(const KvSpec& spec, int layer, bool swa,
                                             const std::string& what) const {
  int source = layer;
  for (const auto& [reader, read] : spec.readers) {
    if (reader == layer) source = read;
  }
  const int head_dim = swa ? head_dim_swa_ : config_.head_dim;
  for (const KvGroupSpec& g : spec.groups) {
    if (std::find(g.layers.begin(), g.layers.end(), source) == g.layers.end()) continue;
    const int window = g.kind->attention_window();
    if (g.head_dim == head_dim && g.n_kv_heads == config_.n_kv_heads &&
        (swa ? window == window_ : window == 0)) {
      return source;
    }
    return Status::InvalidArgument(
        "the assistant's " + what + " layers (head size " + std::to_string(head_dim) + ", " +
        std::to_string(config_.n_kv_heads) + " KV heads, window " +
        std::to_string(swa ? window_ : 0) + ") cannot read target layer " + std::to_string(layer) +
        "'s cache (layer " + std::to_string(source) + ": head size " + std::to_string(g.head_dim) +
        ", " + std::to_string(g.n_kv_heads) + " KV heads, window " + std::to_string(window) + ")");
  }
  return Status::InvalidArgument("target layer " + std::to_string(layer) + " has no cache");
}

Result<DraftTarget> Gemma4AssistantModel::Bind(const Model& target) const {
  const ModelConfig& t = target.config();
  auto differs = [&](const char* what, int ours, int theirs) {
    return Status::InvalidArgument(std::string("draft model ") + what + " " + std::to_string(ours) +
                                   " differs from the target's " + std::to_string(theirs));
  };
  if (t.n_embd != n_target_) return differs("embedding_length_out", n_target_, t.n_embd);
  if (t.n_vocab != config_.n_vocab) return differs("vocabulary", config_.n_vocab, t.n_vocab);
  if (target.token_embedding() == nullptr || t.n_layers < 2) {
    return Status::InvalidArgument("the target (" + t.arch +
                                   ") does not expose the embedding and caches a " + config_.arch +
                                   " drafter reads (a gemma4 target does)");
  }
  const KvSpec spec = target.kv_spec();
  DraftTarget out{.token_embd = target.token_embedding(), .n_embd = t.n_embd};
  auto window_layer = CacheLayer(spec, t.n_layers - 2, true, "sliding-window");
  if (!window_layer.ok()) return window_layer.status();
  auto global_layer = CacheLayer(spec, t.n_layers - 1, false, "global");
  if (!global_layer.ok()) return global_layer.status();
  out.window_layer = *window_layer;
  out.global_layer = *global_layer;
  return out;
}

void Gemma4AssistantModel::Attention(const AssistantLayer& l, const DraftTarget& target,
                                     const ForwardBatch& batch, std::span<const int32_t> before,
                                     KvCache& kv, const float* xn, float* x, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const int d = l.head_dim, q_dim = c.n_heads * d;
  float* q = ws.Floats(kQ, static_cast<size_t>(n) * q_dim);
  float* attn = ws.Floats(kAttn, static_cast<size_t>(n) * q_dim);
  float* proj = ws.Floats(kProj, static_cast<size_t>(n) * c.n_embd);
  be.Matmul(l.wq, xn, n, q, ws);
  be.RmsNorm(q, l.q_norm.data(), n * c.n_heads, d, c.norm_eps, q, ws);
  be.Rope(q, batch.positions, c.n_heads, d, l.rope, ws);
  // The query at position p reads the target's keys before p (p's own are not stored): the
  // attention of a query at p - 1 with a window one shorter covers exactly p - window + 1 .. p - 1.
  const KvLayerView& cache = kv.layer(l.swa ? target.window_layer : target.global_layer);
  AttentionBatch read = batch.attention(cache.group);
  read.positions = before;
  const int window = cache.attention_window > 0 ? cache.attention_window - 1 : 0;
  be.PagedAttention(cache, read, q, c.n_heads, {.scale = 1.0f, .window = window}, attn, ws);
  be.Matmul(l.wo, attn, n, proj, ws);
  be.RmsNorm(proj, l.post_attn_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Gemma4AssistantModel::FeedForward(const AssistantLayer& l, int n, float* x,
                                       Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  float* xn = ws.Floats(kXn, static_cast<size_t>(n) * c.n_embd);
  float* proj = ws.Floats(kProj, static_cast<size_t>(n) * c.n_embd);
  be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
  l.feed_forward.Forward(be, c, n, xn, proj, ws);
  be.RmsNorm(proj, l.post_ffw_norm.data(), n, c.n_embd, c.norm_eps, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
}

void Gemma4AssistantModel::Draft(const DraftTarget& target, const ForwardBatch& batch,
                                 const float* hidden, KvCache& kv, Workspace& ws, float* logits,
                                 float* hidden_next) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const int nt = target.n_embd;
  float* embd = ws.Floats(kTargetEmbd, static_cast<size_t>(n) * nt);
  float* joined = ws.Floats(kJoined, static_cast<size_t>(n) * 2 * nt);
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  be.GetRows(*target.token_embd, batch.tokens, embd, ws);
  be.Scale(embd, n, nt, std::sqrt(static_cast<float>(nt)), ws);
  for (int i = 0; i < n; ++i) {
    float* row = joined + static_cast<size_t>(i) * 2 * nt;
    std::memcpy(row, embd + static_cast<size_t>(i) * nt, sizeof(float) * nt);
    std::memcpy(row + nt, hidden + static_cast<size_t>(i) * nt, sizeof(float) * nt);
  }
  be.Matmul(pre_proj_, joined, n, x, ws);
  std::vector<int32_t> before(batch.positions.begin(), batch.positions.end());
  for (int32_t& p : before) --p;
  for (const AssistantLayer& l : layers_) {
    be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
    Attention(l, target, batch, before, kv, xn, x, ws);
    FeedForward(l, n, x, ws);
    be.Scale(x, n, c.n_embd, l.out_scale.host[0], ws);
  }
  float* normed = ws.Floats(kLogitsIn, static_cast<size_t>(n) * c.n_embd);
  be.RmsNorm(x, head_.norm.data(), n, c.n_embd, c.norm_eps, normed, ws);
  be.Matmul(*head_.output, normed, n, logits, ws);
  be.Matmul(post_proj_, normed, n, hidden_next, ws);
}

// Random weights (`kvserve synth --arch gemma4-assistant`): norms, rope_freqs and output scales 1,
// tied output; windowed heads half as wide as the global ones, as gemma4's recipe makes them.
void SynthAssistantTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  out.Matrix("nextn.pre_projection.weight", 2 * int64_t{s.n_embd_target}, s.n_embd);
  out.Matrix("nextn.post_projection.weight", s.n_embd, s.n_embd_target);
  out.Vector("rope_freqs.weight", s.HeadDim() / 2, SyntheticFill::kOnes);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t d = s.GlobalLayer(i) ? s.HeadDim() : s.HeadDim() / 2;
    out.Vector(p + "attn_norm.weight", s.n_embd, SyntheticFill::kOnes);
    out.Matrix(p + "attn_q.weight", s.n_embd, d * s.n_heads);
    out.Vector(p + "attn_q_norm.weight", d, SyntheticFill::kOnes);
    out.Matrix(p + "attn_output.weight", d * s.n_heads, s.n_embd);
    for (const char* norm : {"post_attention_norm", "ffn_norm", "post_ffw_norm"}) {
      out.Vector(p + norm + ".weight", s.n_embd, SyntheticFill::kOnes);
    }
    out.Matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
    out.Vector(p + "layer_output_scale.weight", 1, SyntheticFill::kOnes);
  }
}

void SynthAssistantMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  AddSyntheticDecoderMetadata(s, n_vocab, w);
  const std::string a = s.arch + ".";
  std::vector<bool> windowed;
  for (int i = 0; i < s.n_layers; ++i) windowed.push_back(!s.GlobalLayer(i));
  w.SetBoolArray(a + "attention.sliding_window_pattern", windowed);
  w.SetUint32(a + "attention.sliding_window", s.window);
  w.SetUint32(a + "attention.key_length_swa", s.HeadDim() / 2);
  w.SetUint32(a + "attention.value_length_swa", s.HeadDim() / 2);
  w.SetUint32(a + "rope.dimension_count_swa", s.HeadDim() / 2);
  w.SetFloat32(a + "rope.freq_base_swa", 10000.0f);
  w.SetUint32(a + "embedding_length_out", s.n_embd_target);
  w.SetUint32(a + "nextn_predict_layers", s.n_layers);
}

const SyntheticRecipe& AssistantSynthetic() {
  // gemma4-assistant-tiny drafts for gemma4-tiny (n_embd 256; heads of 128 globally and 64 in
  // windowed layers, 2 KV heads, window 8): layers S S S G.
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-llama-spm.gguf",
                                      .always_tied = true,
                                      .drafter = true,
                                      .tensors = &SynthAssistantTensors,
                                      .metadata = &SynthAssistantMetadata,
                                      .presets = {{"gemma4-assistant-tiny",
                                                   {.arch = "gemma4-assistant",
                                                    .n_embd = 128,
                                                    .n_layers = 4,
                                                    .n_heads = 4,
                                                    .n_kv_heads = 2,
                                                    .n_ff = 256,
                                                    .n_ctx = 512,
                                                    .norm_eps = 1e-6f,
                                                    .rope_freq_base = 1000000.0f,
                                                    .head_dim = 128,
                                                    .window = 8,
                                                    .swa_period = 4,
                                                    .n_embd_target = 256}}}};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(gemma4_assistant) {
  static const Architecture entry{.gguf_name = "gemma4-assistant",
                                  .load = &LoadModelOf<Gemma4AssistantModel>,
                                  .hf_classes = Gemma4AssistantHfClasses(),
                                  .synthetic = &AssistantSynthetic()};
  return entry;
}

}  // namespace kvserve
