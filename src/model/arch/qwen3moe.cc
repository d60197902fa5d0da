// The qwen3moe architecture (Qwen 3 mixture of experts, e.g. 30B-A3B): qwen3's attention (per-head
// q/k RMSNorm before split-half RoPE, no biases) and a mixture-of-experts feed-forward. A router
// (ffn_gate_inp, [n_expert, n_embd]) scores the experts; each token takes its expert_used_count
// most probable ones (softmax over all, renormalised over the chosen) and adds their SwiGLU
// outputs, weighted, to its residual. Experts are the 3-D tensors ffn_gate_exps, ffn_up_exps
// ([n_expert, n_ff_exp, n_embd]) and ffn_down_exps ([n_expert, n_embd, n_ff_exp]).
//
// Batching: per layer the tokens are grouped by expert, and each expert's three matrices are
// multiplied once for all the tokens routed to it (a step reads each routed expert once). Each
// expert output row lands in the token's slot for that expert (its place in the token's top-k
// list), and the slots are summed per token in that order: a token's result does not depend on
// which other tokens share the batch (matmul rows are independent).
//
// Hugging Face: Qwen3MoeForCausalLM (qwen3's keys with num_experts, num_experts_per_tok,
// moe_intermediate_size; norm_topk_prob must be true and every layer sparse). Experts come one
// tensor each ("mlp.experts.E.gate_proj.weight") or fused per layer (transformers 5), and are
// stacked into the 3-D GGUF tensors.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/attention_block.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"
#include "model/rotary_embedding.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

// Buffer ids past the shared decoder's (decoder_blocks.h).
enum MoeBuffer : int {
  kRouterLogits = kLogitsIn + 1,  // [n_tokens, n_expert]
  kExpertIn,                      // [tokens of one expert, n_embd]
  kExpertGate,                    // [tokens of one expert, n_ff_exp]
  kExpertUp,                      // [tokens of one expert, n_ff_exp]
  kExpertOut,                     // [tokens of one expert, n_embd]
  kSlots,                         // [n_tokens * n_used, n_embd]: each token's expert outputs
};

struct MoeLayer {
  WeightVector attn_norm, ffn_norm;    // [n_embd]
  AttentionBlock attention;            // qwen3's: per-head q/k norms, no biases
  WeightMatrix router;                 // [n_expert, n_embd]
  std::vector<WeightMatrix> gate, up;  // [n_expert] of [n_ff_exp, n_embd]
  std::vector<WeightMatrix> down;      // [n_expert] of [n_embd, n_ff_exp]
};

// RouteTopK's choices and their grouping by expert (Backend::GroupByExpert), reused every layer.
struct Routing {
  std::vector<int32_t> ids;    // [n_tokens * n_used]
  std::vector<float> weights;  // [n_tokens * n_used]
  ExpertGroups groups;
};

class Qwen3MoeModel final : public Model {
 public:
  Qwen3MoeModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_));
    KVSERVE_RETURN_IF_ERROR(ReadExpertKeys());
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    KVSERVE_RETURN_IF_ERROR(rope_.Load(file_, c, RopeMode::kSplitHalves, weights));
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      MoeLayer& l = layers_[i];
      weights.vectors.insert(weights.vectors.end(), {&l.attn_norm, &l.ffn_norm});
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, {.qk_norm = true}, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate_inp.weight", n_expert_, c.n_embd, &l.router));
      KVSERVE_RETURN_IF_ERROR(
          r.ExpertMatrices(p + "ffn_gate_exps.weight", n_expert_, n_ff_exp_, c.n_embd, &l.gate));
      KVSERVE_RETURN_IF_ERROR(
          r.ExpertMatrices(p + "ffn_up_exps.weight", n_expert_, n_ff_exp_, c.n_embd, &l.up));
      KVSERVE_RETURN_IF_ERROR(
          r.ExpertMatrices(p + "ffn_down_exps.weight", n_expert_, c.n_embd, n_ff_exp_, &l.down));
      weights.matrices.push_back(&l.router);
      for (int e = 0; e < n_expert_; ++e) {
        weights.matrices.insert(weights.matrices.end(), {&l.gate[e], &l.up[e], &l.down[e]});
      }
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const size_t n = batch.n_tokens();
    Buffers b{.x = ws.Floats(kX, n * c.n_embd),
              .xn = ws.Floats(kXn, n * c.n_embd),
              .proj = ws.Floats(kProj, n * c.n_embd),
              .router = ws.Floats(kRouterLogits, n * n_expert_),
              .slots = ws.Floats(kSlots, n * n_used_ * c.n_embd)};
    Routing routing;
    routing.ids.resize(n * n_used_);
    routing.weights.resize(n * n_used_);
    EmbedTokens(backend_, batch, head_.token_embd, b.x, ws);
    for (int il = 0; il < c.n_layers; ++il) {
      Attention(layers_[il], batch, kv.layer(il), b, ws);
      Experts(layers_[il], static_cast<int>(n), b, routing, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      backend_.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(backend_, batch, b.x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  struct Buffers {
    float *x, *xn, *proj, *router, *slots;
  };

  // Reads <arch>.expert_count, .expert_used_count and .expert_feed_forward_length.
  Status ReadExpertKeys() {
    constexpr uint64_t kMaxExperts = 1024;
    const std::string prefix = config_.arch + ".";
    auto read = [&](const std::string& key, uint64_t max, const std::string& bound, int* out) {
      auto value = file_.GetUint(prefix + key);
      if (!value.ok()) return value.status();
      if (*value == 0 || *value > max) {
        return Status::InvalidArgument(file_.path() + ": metadata key '" + prefix + key +
                                       "' = " + std::to_string(*value) + " is out of range (1 to " +
                                       bound + ")");
      }
      *out = static_cast<int>(*value);
      return Status::Ok();
    };
    KVSERVE_RETURN_IF_ERROR(
        read("expert_count", kMaxExperts, std::to_string(kMaxExperts), &n_expert_));
    KVSERVE_RETURN_IF_ERROR(read("expert_used_count", n_expert_,
                                 "expert_count " + std::to_string(n_expert_), &n_used_));
    return read("expert_feed_forward_length", 1 << 20, std::to_string(1 << 20), &n_ff_exp_);
  }

  void Attention(const MoeLayer& w, const ForwardBatch& batch, const KvLayerView& kv,
                 const Buffers& b, Workspace& ws) const {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    be.RmsNorm(b.x, w.attn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    const RopeParams rope = rope_.params();
    w.attention.Forward(be, c, batch, kv, {.rope = &rope}, b.xn, b.proj, ws);
    be.Add(b.x, b.proj, n, c.n_embd, ws);
  }

  // x += Σ over each token's chosen experts of weight · down(silu(gate(xn)) * up(xn)), xn the
  // RMSNorm of x; one pass of each expert's matrices over all its tokens.
  void Experts(const MoeLayer& w, int n, const Buffers& b, Routing& r, Workspace& ws) const {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    be.RmsNorm(b.x, w.ffn_norm.data(), n, c.n_embd, c.norm_eps, b.xn, ws);
    be.Matmul(w.router, b.xn, n, b.router, ws);
    be.RouteTopK(b.router, n, n_expert_, n_used_, r.ids.data(), r.weights.data(), ws);
    be.GroupByExpert(r.ids, n_used_, n_expert_, r.groups);
    const ExpertGroups& g = r.groups;
    int most = 0;
    for (int e = 0; e < n_expert_; ++e) most = std::max(most, g.rows_of(e));
    const size_t rows = static_cast<size_t>(most);
    float* in = ws.Floats(kExpertIn, rows * c.n_embd);
    float* gate = ws.Floats(kExpertGate, rows * n_ff_exp_);
    float* up = ws.Floats(kExpertUp, rows * n_ff_exp_);
    float* out = ws.Floats(kExpertOut, rows * c.n_embd);
    for (int e = 0; e < n_expert_; ++e) {
      const int m = g.rows_of(e);
      if (m == 0) continue;
      const std::span<const int32_t> tokens(g.rows.data() + g.begin[e], m);
      const std::span<const int32_t> slots(g.slots.data() + g.begin[e], m);
      be.GatherRows(b.xn, c.n_embd, tokens, c.n_embd, in);
      be.Matmul(w.gate[e], in, m, gate, ws);
      be.Matmul(w.up[e], in, m, up, ws);
      be.SwiGlu(gate, up, m, n_ff_exp_, ws);
      be.Matmul(w.down[e], gate, m, out, ws);
      be.ScatterRows(out, c.n_embd, slots, c.n_embd, b.slots);
    }
    be.AddWeightedRows(b.x, b.slots, r.weights.data(), n, n_used_, c.n_embd, ws);
  }

  int n_expert_ = 0;  // <arch>.expert_count
  int n_used_ = 0;    // <arch>.expert_used_count: experts per token
  int n_ff_exp_ = 0;  // <arch>.expert_feed_forward_length: an expert's hidden width
  RotaryEmbedding rope_;
  OutputHead head_;
  std::vector<MoeLayer> layers_;
};

Result<std::unique_ptr<Model>> LoadQwen3Moe(GgufFile file, ModelConfig config,
                                            const Backend& backend) {
  auto model = std::make_unique<Qwen3MoeModel>(std::move(file), std::move(config), backend);
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

Status ReadQwen3MoeConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r, {}, c));
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("use_sliding_window", false, true,
                                        "llama.cpp's Qwen files attend to the whole context"));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_experts"}, 4096, &c.n_experts));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_experts_per_tok"}, c.n_experts, &c.n_experts_used));
  KVSERVE_RETURN_IF_ERROR(r.Count({"moe_intermediate_size"}, kMaxHfDim, &c.n_ff_expert));
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("norm_topk_prob", true, false,
                                        "kvserve renormalises the top-k expert weights"));
  int step = 1;
  KVSERVE_RETURN_IF_ERROR(r.Count({"decoder_sparse_step"}, 4096, &step, 1));
  if (step != 1) {
    return r.Unsupported("decoder_sparse_step", "every layer must be a mixture of experts");
  }
  return r.RequireAbsent("mlp_only_layers", "every layer must be a mixture of experts");
}

// "mlp.experts.E.<w>_proj.weight": expert E of the stacked ffn_<w>_exps tensor.
bool MapExpert(const std::string& rest, const HfConfig& c, int layer, HfMapping* out) {
  int expert = 0;
  std::string w;
  if (!SplitHfLayer(rest, "mlp.experts.", &expert, &w) || expert >= c.n_experts) return false;
  static const std::map<std::string_view, std::string_view> kExperts = {
      {"gate_proj.weight", "ffn_gate_exps.weight"},
      {"up_proj.weight", "ffn_up_exps.weight"},
      {"down_proj.weight", "ffn_down_exps.weight"},
  };
  auto it = kExperts.find(w);
  if (it == kExperts.end()) return false;
  *out = HfMapping{.name = GgufBlockName(layer, it->second), .expert = expert};
  return true;
}

// transformers 5's fused experts: "mlp.experts.gate_up_proj" [n_expert, 2 n_ff, n_embd] (gate
// rows, then up rows, per expert) and "mlp.experts.down_proj" [n_expert, n_embd, n_ff], with or
// without ".weight".
bool MapFusedExperts(std::string rest, int layer, HfMapping* out) {
  if (rest.ends_with(".weight")) rest.resize(rest.size() - 7);
  if (rest == "mlp.experts.gate_up_proj") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_gate_exps.weight"),
                     .transform = HfTransform::kSplitGateUp};
    return true;
  }
  if (rest == "mlp.experts.down_proj") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_down_exps.weight")};
    return true;
  }
  return false;
}

bool MapExperts(const std::string& rest, const HfConfig& c, int layer, HfMapping* out) {
  return MapExpert(rest, c, layer, out) || MapFusedExperts(rest, layer, out);
}

Result<HfMapping> MapQwen3MoeTensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{
      .layer =
          [] {
            HfLayerNames names = LlamaLayerNames();
            names.erase("mlp.gate_proj.weight");
            names.erase("mlp.up_proj.weight");
            names.erase("mlp.down_proj.weight");
            names["mlp.gate.weight"] = "ffn_gate_inp.weight";
            names["self_attn.q_norm.weight"] = "attn_q_norm.weight";
            names["self_attn.k_norm.weight"] = "attn_k_norm.weight";
            return names;
          }(),
      .map_layer = &MapExperts};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteQwen3MoeMetadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {}, w);
  w.SetUint32("qwen3moe.expert_count", static_cast<uint32_t>(c.n_experts));
  w.SetUint32("qwen3moe.expert_used_count", static_cast<uint32_t>(c.n_experts_used));
  w.SetUint32("qwen3moe.expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
}

// Random weights (`kvserve synth --arch qwen3moe`): the router F32, as in llama.cpp's files.
void SynthQwen3MoeTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    AddSyntheticAttention(s, i, /*qk_norm=*/true, out);
    out.F32Matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert);
    out.Experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff, s.n_expert);
    out.Experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff, s.n_expert);
    out.Experts(p + "ffn_down_exps.weight", s.n_ff, s.n_embd, s.n_expert);
  }
}

void SynthQwen3MoeMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  AddSyntheticDecoderMetadata(s, n_vocab, w);
  w.SetUint32("qwen3moe.expert_count", s.n_expert);
  w.SetUint32("qwen3moe.expert_used_count", s.n_expert_used);
  w.SetUint32("qwen3moe.expert_feed_forward_length", s.n_ff);
}

const SyntheticRecipe& Qwen3MoeSynthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-llama-spm.gguf",
                                      .experts = true,
                                      .tensors = &SynthQwen3MoeTensors,
                                      .metadata = &SynthQwen3MoeMetadata};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(qwen3moe) {
  static const Architecture entry{
      .gguf_name = "qwen3moe",
      .load = &LoadQwen3Moe,
      .hf_classes = {{"Qwen3MoeForCausalLM", "qwen3_moe", &ReadQwen3MoeConfig, &MapQwen3MoeTensor,
                      &WriteQwen3MoeMetadata}},
      .synthetic = &Qwen3MoeSynthetic()};
  return entry;
}

}  // namespace kvserve
