// The gpt-oss architecture (OpenAI gpt-oss-20b and -120b), as llama.cpp's openai-moe graph reads
// its GGUF files. Per layer:
//   x += wo · attention(rope(q), rope(k), v) + bo, of RMSNorm(x) by attn_norm, where q, k, v carry
//        biases, RoPE turns split halves with YaRN (rope.scaling.type yarn), scores are scaled by
//        1 / sqrt(head_dim) and every head's softmax has a learned sink (attn_sinks, [n_heads]);
//        layer i attends to a sliding window of attention.sliding_window keys when
//        i % P < P - 1 (P = attention.sliding_window_pattern, 2 where absent: the even layers),
//        else to everything;
//   x += the mixture of experts of RMSNorm(x) by post_attention_norm (moe_feed_forward.h: router
//        with a bias, the softmax of the chosen experts' scores, experts with biases and the
//        clamped SwiGLU).
// Then RMSNorm by output_norm and output.weight. The head size is attention.key_length (64 heads
// of 64 against a 2880-wide residual in the 20B model). Expert weights are MXFP4 in the released
// files.
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

struct GptOssLayer {
  WeightVector attn_norm, post_attn_norm;  // [n_embd]
  AttentionBlock attention;                // q/k/v and output biases
  WeightVector sinks;                      // [n_heads]
  MoeFeedForward experts;                  // biases, clamped SwiGLU
};

class GptOssModel final : public Model {
 public:
  GptOssModel(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
    KVSERVE_RETURN_IF_ERROR(config_.ReadRopeScaling(file_, /*allow_yarn=*/true));
    KVSERVE_RETURN_IF_ERROR(ReadWindows());
    auto shape = MoeShape::Read(file_, config_.arch);
    if (!shape.ok()) return shape.status();
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    layers_.resize(c.n_layers);
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm}};
    KVSERVE_RETURN_IF_ERROR(rope_.Load(file_, c, RopeMode::kSplitHalves, weights));
    const MoeOptions moe{.biases = true, .activation = MoeActivation::kSwiGluOai};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      GptOssLayer& l = layers_[i];
      weights.vectors.insert(weights.vectors.end(), {&l.attn_norm, &l.post_attn_norm, &l.sinks});
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(
          l.attention.Load(r, c, p, {.qkv_bias = true, .output_bias = true}, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_sinks.weight", c.n_heads, &l.sinks));
      KVSERVE_RETURN_IF_ERROR(
          r.Vector(p + "post_attention_norm.weight", c.n_embd, &l.post_attn_norm));
      KVSERVE_RETURN_IF_ERROR(l.experts.Load(r, c, *shape, p, moe, weights));
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  KvSpec kv_spec() const override { return KvSpecByWindow(config_, windows_); }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    const RopeParams rope = rope_.params();
    for (int il = 0; il < c.n_layers; ++il) {
      const GptOssLayer& l = layers_[il];
      be.RmsNorm(x, l.attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), {.rope = &rope, .sinks = l.sinks.data()}, xn,
                          proj, ws);
      be.Add(x, proj, n, c.n_embd, ws);
      be.RmsNorm(x, l.post_attn_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
      l.experts.Forward(be, c.n_embd, xn, n, x, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.RmsNorm(in, head_.norm.data(), n_rows, c.n_embd, c.norm_eps, out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  // attention.sliding_window (required) and .sliding_window_pattern (default 2) into windows_.
  Status ReadWindows() {
    const std::string a = config_.arch + ".attention.";
    auto window = file_.GetUint(a + "sliding_window");
    if (!window.ok()) return window.status();
    auto pattern = file_.GetUintOr(a + "sliding_window_pattern", 2);
    if (!pattern.ok()) return pattern.status();
    if (*window == 0 || *window > (1u << 24)) {
      return Status::InvalidArgument(file_.path() + ": metadata key '" + a + "sliding_window' = " +
                                     std::to_string(*window) + " is out of range (1 to 2^24)");
    }
    if (*pattern == 0 || *pattern > 4096) {
      return Status::InvalidArgument(file_.path() + ": metadata key '" + a +
                                     "sliding_window_pattern' = " + std::to_string(*pattern) +
                                     " is out of range (1 to 4096)");
    }
    const uint64_t p = *pattern;
    for (int i = 0; i < config_.n_layers; ++i) {
      const bool windowed = static_cast<uint64_t>(i) % p < p - 1;
      windows_.push_back(windowed ? static_cast<int>(*window) : 0);
    }
    return Status::Ok();
  }

  std::vector<int> windows_;  // [n_layers]: 0 = global
  RotaryEmbedding rope_;
  OutputHead head_;
  std::vector<GptOssLayer> layers_;
};

// GptOssForCausalLM (transformers: BF16/F16/F32, or the released MXFP4 experts): qwen-style keys
// with head_dim, num_local_experts, num_experts_per_tok, sliding_window and YaRN; layer_types must
// be the alternation llama.cpp assumes (sliding first), swiglu_limit 7. The released MXFP4
// checkpoints (quantization_config.quant_method mxfp4) keep their experts in MXFP4, repacked as
// llama.cpp's converter repacks them.
Status ReadGptOssConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(
      r,
      {.head_dim_always = true,
       .attention_bias = true,
       .rope = {.yarn = true, .supported = "kvserve implements default, linear and yarn"}},
      c));
  KVSERVE_RETURN_IF_ERROR(r.OneOf("quantization_config.quant_method", {"mxfp4"}));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_local_experts"}, 1024, &c.n_experts));
  KVSERVE_RETURN_IF_ERROR(
      r.Count({"num_experts_per_tok", "experts_per_token"}, c.n_experts, &c.n_experts_used));
  c.n_ff_expert = c.n_ff;
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &c.sliding_window));
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber("swiglu_limit", 7.0, "kvserve clamps at 7 as llama.cpp"));
  if (r.Has("layer_types")) {
    auto types =
        r.StringList("layer_types", static_cast<size_t>(c.n_layers), "one entry per layer");
    if (!types.ok()) return types.status();
    for (int i = 0; i < c.n_layers; ++i) {
      const char* wanted = i % 2 == 0 ? "sliding_attention" : "full_attention";
      if ((*types)[i] != wanted) {
        return r.Unsupported("layer_types", "layer " + std::to_string(i) + " is '" + (*types)[i] +
                                                "'; llama.cpp's gpt-oss alternates sliding and "
                                                "full layers, sliding first");
      }
    }
  }
  return Status::Ok();
}

// gate_up_proj and down_proj (with _bias) of mlp.experts: fused, transposed, interleaved; or, in
// the released MXFP4 checkpoints, their _blocks and _scales (rows interleaved the same way, the
// input dimension already the blocks').
bool MapGptOssMxfp4(const std::string& rest, int layer, HfMapping* out) {
  for (const char* w : {"gate_up_proj", "down_proj"}) {
    const std::string base = std::string("mlp.experts.") + w;
    for (const auto& [suffix, transform] : {std::pair{"_blocks", HfTransform::kMxfp4Blocks},
                                            {"_scales", HfTransform::kMxfp4Scales}}) {
      if (rest != base + suffix) continue;
      const bool gate_up = w[0] == 'g';
      *out = HfMapping{
          .name = GgufBlockName(layer, gate_up ? "ffn_gate_exps.weight" : "ffn_down_exps.weight"),
          .transform = transform,
          .interleaved_rows = gate_up};
      return true;
    }
  }
  return false;
}

bool MapGptOssExperts(const std::string& rest, const HfConfig&, int layer, HfMapping* out) {
  if (MapGptOssMxfp4(rest, layer, out)) return true;
  if (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.gate_up_proj_bias") {
    const bool bias = rest.ends_with("_bias");
    *out = HfMapping{
        .name = GgufBlockName(layer, bias ? "ffn_gate_exps.bias" : "ffn_gate_exps.weight"),
        .transform = HfTransform::kSplitInterleavedGateUp};
    return true;
  }
  if (rest == "mlp.experts.down_proj") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_down_exps.weight"),
                     .transform = HfTransform::kTransposeExperts};
    return true;
  }
  if (rest == "mlp.experts.down_proj_bias") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_down_exps.bias")};
    return true;
  }
  return false;
}

Result<HfMapping> MapGptOssTensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{.layer =
                                            [] {
                                              HfLayerNames names = LlamaLayerNames();
                                              names.erase("mlp.gate_proj.weight");
                                              names.erase("mlp.up_proj.weight");
                                              names.erase("mlp.down_proj.weight");
                                              names["post_attention_layernorm.weight"] =
                                                  "post_attention_norm.weight";
                                              names["self_attn.q_proj.bias"] = "attn_q.bias";
                                              names["self_attn.k_proj.bias"] = "attn_k.bias";
                                              names["self_attn.v_proj.bias"] = "attn_v.bias";
                                              names["self_attn.o_proj.bias"] = "attn_output.bias";
                                              names["self_attn.sinks"] = "attn_sinks.weight";
                                              names["mlp.router.weight"] = "ffn_gate_inp.weight";
                                              names["mlp.router.bias"] = "ffn_gate_inp.bias";
                                              return names;
                                            }(),
                                        .map_layer = &MapGptOssExperts};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteGptOssMetadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {.window_always = true}, w);
  w.SetUint32("gpt-oss.expert_count", static_cast<uint32_t>(c.n_experts));
  w.SetUint32("gpt-oss.expert_used_count", static_cast<uint32_t>(c.n_experts_used));
  w.SetUint32("gpt-oss.expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
}

// Random weights (`kvserve synth --arch gpt-oss`): biases and sinks random too (they are learned),
// the router F32; experts in SyntheticOptions::expert_type where set (MXFP4 in released files).
void SynthGptOssTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  const int64_t q_dim = static_cast<int64_t>(s.HeadDim()) * s.n_heads;
  const int64_t kv_dim = static_cast<int64_t>(s.HeadDim()) * s.n_kv_heads;
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    out.Vector(p + "attn_norm.weight", s.n_embd, SyntheticFill::kOnes);
    for (const auto& [name, rows] :
         {std::pair{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}}) {
      out.Matrix(p + name + ".weight", s.n_embd, rows);
      out.Vector(p + name + ".bias", rows, SyntheticFill::kRandom);
    }
    out.Matrix(p + "attn_output.weight", q_dim, s.n_embd);
    out.Vector(p + "attn_output.bias", s.n_embd, SyntheticFill::kRandom);
    out.Vector(p + "attn_sinks.weight", s.n_heads, SyntheticFill::kRandom);
    out.Vector(p + "post_attention_norm.weight", s.n_embd, SyntheticFill::kOnes);
    out.F32Matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert);
    out.Vector(p + "ffn_gate_inp.bias", s.n_expert, SyntheticFill::kRandom);
    out.Experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff, s.n_expert);
    out.F32Matrix(p + "ffn_gate_exps.bias", s.n_ff, s.n_expert);
    out.Experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff, s.n_expert);
    out.F32Matrix(p + "ffn_up_exps.bias", s.n_ff, s.n_expert);
    out.Experts(p + "ffn_down_exps.weight", s.n_ff, s.n_embd, s.n_expert);
    out.F32Matrix(p + "ffn_down_exps.bias", s.n_embd, s.n_expert);
  }
}

// gpt-oss's keys as llama.cpp's converter writes them: YaRN by 32 over 4096 original positions.
void SynthGptOssMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  AddSyntheticDecoderMetadata(s, n_vocab, w);
  w.SetUint32("gpt-oss.expert_count", s.n_expert);
  w.SetUint32("gpt-oss.expert_used_count", s.n_expert_used);
  w.SetUint32("gpt-oss.expert_feed_forward_length", s.n_ff);
  w.SetUint32("gpt-oss.attention.sliding_window", s.window);
  w.SetString("gpt-oss.rope.scaling.type", "yarn");
  w.SetFloat32("gpt-oss.rope.scaling.factor", 32.0f);
  w.SetUint32("gpt-oss.rope.scaling.original_context_length", 4096);
}

const SyntheticRecipe& GptOssSynthetic() {
  // The 20B model's shape (its o200k vocabulary is not on this machine: the llama-bpe one stands
  // in), and a small one for the reference tests: q_dim 512 != n_embd 256, layer 0 windowed.
  static const SyntheticRecipe recipe{.vocab_file = "vocab/ggml-vocab-llama-bpe.gguf",
                                      .experts = true,
                                      .tensors = &SynthGptOssTensors,
                                      .metadata = &SynthGptOssMetadata,
                                      .presets = {{"gpt-oss-20b",
                                                   {.arch = "gpt-oss",
                                                    .n_embd = 2880,
                                                    .n_layers = 24,
                                                    .n_heads = 64,
                                                    .n_kv_heads = 8,
                                                    .n_ff = 2880,
                                                    .n_ctx = 131072,
                                                    .rope_freq_base = 150000.0f,
                                                    .n_expert = 32,
                                                    .n_expert_used = 4,
                                                    .head_dim = 64,
                                                    .window = 128}},
                                                  {"gpt-oss-tiny",
                                                   {.arch = "gpt-oss",
                                                    .n_embd = 256,
                                                    .n_layers = 2,
                                                    .n_heads = 8,
                                                    .n_kv_heads = 2,
                                                    .n_ff = 256,
                                                    .n_ctx = 512,
                                                    .rope_freq_base = 150000.0f,
                                                    .n_expert = 4,
                                                    .n_expert_used = 2,
                                                    .head_dim = 64,
                                                    .window = 8}}}};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(gpt_oss) {
  static const Architecture entry{.gguf_name = "gpt-oss",
                                  .load = &LoadModelOf<GptOssModel>,
                                  .hf_classes = {{"GptOssForCausalLM", "gpt_oss", &ReadGptOssConfig,
                                                  &MapGptOssTensor, &WriteGptOssMetadata}},
                                  .synthetic = &GptOssSynthetic()};
  return entry;
}

}  // namespace kvserve
