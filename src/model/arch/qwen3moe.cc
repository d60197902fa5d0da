// The qwen3moe architecture (Qwen 3 mixture of experts, e.g. 30B-A3B): qwen3's attention (per-head
// q/k RMSNorm before split-half RoPE, no biases) and a mixture-of-experts feed-forward
// (moe_feed_forward.h: softmax router, the top expert_used_count experts renormalised, SwiGLU
// experts without biases).
//
// Hugging Face: Qwen3MoeForCausalLM (qwen3's keys with num_experts, num_experts_per_tok,
// moe_intermediate_size; norm_topk_prob must be true and every layer sparse). Experts come one
// tensor each ("mlp.experts.E.gate_proj.weight") or fused per layer (transformers 5), and are
// stacked into the 3-D GGUF tensors.
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/attention_block.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"
#include "model/moe_feed_forward.h"
#include "model/rotary_embedding.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct MoeLayer {
  WeightVector attn_norm, ffn_norm;  // [n_embd]
  AttentionBlock attention;          // qwen3's: per-head q/k norms, no biases
  MoeFeedForward experts;
};

class Qwen3MoeModel final : public Model {
 public:
  Qwen3MoeModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_));
    auto shape = MoeShape::Read(file_, config_.arch);
    if (!shape.ok()) return shape.status();
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
      KVSERVE_RETURN_IF_ERROR(l.experts.Load(r, c, *shape, p, {}, weights));
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
    const RopeParams rope = rope_.params();
    for (int il = 0; il < c.n_layers; ++il) {
      const MoeLayer& l = layers_[il];
      be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), {.rope = &rope}, xn, proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
      be.RmsNorm(x, l.ffn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.experts.Forward(be, c.n_embd, xn, n, x, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  RotaryEmbedding rope_;
  OutputHead head_;
  std::vector<MoeLayer> layers_;
};

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
      .map_layer = &MapHfExperts};
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
      .load = &LoadModelOf<Qwen3MoeModel>,
      .hf_classes = {{"Qwen3MoeForCausalLM", "qwen3_moe", &ReadQwen3MoeConfig, &MapQwen3MoeTensor,
                      &WriteQwen3MoeMetadata}},
      .synthetic = &Qwen3MoeSynthetic()};
  return entry;
}

}  // namespace kvserve
