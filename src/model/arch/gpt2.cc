// The gpt2 architecture: learned position embeddings, LayerNorm with biases, a fused QKV
// projection with bias, GELU feed-forward with biases, tied output.
//
// Hugging Face: GPT2LMHeadModel (n_embd, n_layer, n_head, n_positions or n_ctx, n_inner (default
// 4 * n_embd), layer_norm_epsilon; activation_function gelu_new). Its Conv1D weights are stored
// [in, out] and are transposed.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/architecture.h"
#include "model/attention_block.h"
#include "model/decoder_blocks.h"
#include "model/feed_forward.h"
#include "model/hf_families.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct Gpt2Layer {
  WeightVector attn_norm, attn_norm_bias;  // [n_embd]
  AttentionBlock attention;                // fused QKV and output projection, with biases
  WeightVector ffn_norm, ffn_norm_bias;    // [n_embd]
  FeedForward feed_forward;                // up, GELU, down, with biases
};

class Gpt2Model final : public Model {
 public:
  Gpt2Model(GgufFile file, ModelConfig config, const Backend& backend)
      : Model(std::move(file), std::move(config), backend) {}

  int max_positions() const override { return config_.n_ctx_train; }

  Status Load() {
    KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_epsilon"));
    const ModelConfig& c = config_;
    const WeightLoader r(file_);
    const int e = c.n_embd;
    KVSERVE_RETURN_IF_ERROR(head_.Load(r, c));
    KVSERVE_RETURN_IF_ERROR(r.Matrix("position_embd.weight", c.n_ctx_train, e, &position_embd_));
    KVSERVE_RETURN_IF_ERROR(r.Vector("output_norm.bias", e, &output_norm_bias_));
    layers_.resize(c.n_layers);
    WeightList weights{.matrices = {head_.output}, .vectors = {&head_.norm, &output_norm_bias_}};
    const AttentionBlockOptions attention{.qkv_bias = true, .fused_qkv = true, .output_bias = true};
    for (int i = 0; i < c.n_layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      Gpt2Layer& l = layers_[i];
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", e, &l.attn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.bias", e, &l.attn_norm_bias));
      KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, attention, weights));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", e, &l.ffn_norm));
      KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.bias", e, &l.ffn_norm_bias));
      KVSERVE_RETURN_IF_ERROR(l.feed_forward.Load(r, c, p, weights));
      weights.vectors.insert(weights.vectors.end(),
                             {&l.attn_norm, &l.attn_norm_bias, &l.ffn_norm, &l.ffn_norm_bias});
    }
    DeclareWeights(weights);
    return Status::Ok();
  }

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
               float* logits) const override {
    const ModelConfig& c = config_;
    const Backend& be = backend_;
    const int n = batch.n_tokens();
    const int e = c.n_embd;
    const auto [x, xn, proj] = ResidualStream(ws, n, e);
    EmbedTokens(be, batch, head_.token_embd, x, ws);
    float* pos = ws.Floats(kTmp, static_cast<size_t>(n) * e);
    be.GetRows(position_embd_, batch.positions, pos, ws);
    be.Add(x, pos, n, e, ws);
    for (int il = 0; il < c.n_layers; ++il) {
      const Gpt2Layer& l = layers_[il];
      be.LayerNorm(x, l.attn_norm.data(), l.attn_norm_bias.data(), n, e, c.norm_eps, xn, ws);
      l.attention.Forward(be, c, batch, kv.layer(il), {}, xn, proj, ws);
      be.Add(x, proj, n, e, ws);
      be.LayerNorm(x, l.ffn_norm.data(), l.ffn_norm_bias.data(), n, e, c.norm_eps, xn, ws);
      l.feed_forward.Forward(be, c, n, xn, proj, ws);
      be.Add(x, proj, n, e, ws);
    }
    auto norm = [&](const float* in, int n_rows, float* out) {
      be.LayerNorm(in, head_.norm.data(), output_norm_bias_.data(), n_rows, c.n_embd, c.norm_eps,
                   out, ws);
    };
    ProjectLogits(be, batch, x, c.n_embd, norm, *head_.output, logits, ws);
  }

 private:
  OutputHead head_;
  WeightMatrix position_embd_;  // [n_ctx_train, n_embd]
  WeightVector output_norm_bias_;
  std::vector<Gpt2Layer> layers_;
};

Result<std::unique_ptr<Model>> LoadGpt2(GgufFile file, ModelConfig config, const Backend& backend) {
  auto model = std::make_unique<Gpt2Model>(std::move(file), std::move(config), backend);
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

Status ReadGpt2Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_embd", "hidden_size"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_layer", "num_hidden_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_head", "num_attention_heads"}, 4096, &c.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_positions", "n_ctx"}, 1 << 24, &c.n_ctx));
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_inner"}, kMaxHfDim, &c.n_ff, 4 * c.n_embd));
  c.norm_eps = 1e-5;
  KVSERVE_RETURN_IF_ERROR(r.Float("layer_norm_epsilon", &c.norm_eps, false));
  KVSERVE_RETURN_IF_ERROR(r.OneOf("activation_function", {"gelu_new"}));
  c.n_kv_heads = c.n_heads;
  c.tie_word_embeddings = true;
  KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  return HeadDimFromHiddenSize(r, c);
}

// The GGUF name and transform of a GPT2LMHeadModel tensor, or an error naming it.
Result<HfMapping> MapGpt2Tensor(std::string_view hf_name, const HfConfig& c) {
  std::string_view name = hf_name;
  if (name.substr(0, 12) == "transformer.") name.remove_prefix(12);
  static const std::map<std::string_view, std::string_view> kGlobal = {
      {"wte.weight", "token_embd.weight"},   {"wpe.weight", "position_embd.weight"},
      {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"},
      {"lm_head.weight", "output.weight"},
  };
  if (auto it = kGlobal.find(name); it != kGlobal.end()) {
    if (name == "lm_head.weight" && c.tie_word_embeddings) return HfMapping{};
    return HfMapping{.name = std::string(it->second)};
  }
  static const std::map<std::string_view, std::pair<std::string_view, HfTransform>> kLayer = {
      {"ln_1.weight", {"attn_norm.weight", HfTransform::kNone}},
      {"ln_1.bias", {"attn_norm.bias", HfTransform::kNone}},
      {"attn.c_attn.weight", {"attn_qkv.weight", HfTransform::kTranspose}},
      {"attn.c_attn.bias", {"attn_qkv.bias", HfTransform::kNone}},
      {"attn.c_proj.weight", {"attn_output.weight", HfTransform::kTranspose}},
      {"attn.c_proj.bias", {"attn_output.bias", HfTransform::kNone}},
      {"ln_2.weight", {"ffn_norm.weight", HfTransform::kNone}},
      {"ln_2.bias", {"ffn_norm.bias", HfTransform::kNone}},
      {"mlp.c_fc.weight", {"ffn_up.weight", HfTransform::kTranspose}},
      {"mlp.c_fc.bias", {"ffn_up.bias", HfTransform::kNone}},
      {"mlp.c_proj.weight", {"ffn_down.weight", HfTransform::kTranspose}},
      {"mlp.c_proj.bias", {"ffn_down.bias", HfTransform::kNone}},
  };
  int layer = 0;
  std::string rest;
  if (SplitHfLayer(name, "h.", &layer, &rest) && layer < c.n_layers) {
    if (rest == "attn.bias" || rest == "attn.masked_bias") return HfMapping{};  // mask buffers
    if (auto it = kLayer.find(rest); it != kLayer.end()) {
      return HfMapping{.name = GgufBlockName(layer, it->second.first),
                       .transform = it->second.second};
    }
  }
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer GPT2LMHeadModel");
}

void WriteGpt2Metadata(const HfConfig& c, GgufWriter& w) {
  w.SetUint32("gpt2.context_length", static_cast<uint32_t>(c.n_ctx));
  w.SetUint32("gpt2.embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetUint32("gpt2.block_count", static_cast<uint32_t>(c.n_layers));
  w.SetUint32("gpt2.feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetUint32("gpt2.attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.SetFloat32("gpt2.attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
}

// Random weights (`kvserve synth --arch gpt2`): LayerNorms 1 and biases 0, fused QKV; always tied.
void SynthGpt2Tensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  using enum SyntheticFill;
  const int64_t embd = s.n_embd;
  out.Matrix("token_embd.weight", embd, n_vocab);
  out.Matrix("position_embd.weight", embd, s.n_ctx);
  out.Vector("output_norm.weight", embd, kOnes);
  out.Vector("output_norm.bias", embd, kZeros);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    out.Vector(p + "attn_norm.weight", embd, kOnes);
    out.Vector(p + "attn_norm.bias", embd, kZeros);
    out.Matrix(p + "attn_qkv.weight", embd, 3 * embd);
    out.Vector(p + "attn_qkv.bias", 3 * embd, kZeros);
    out.Matrix(p + "attn_output.weight", embd, embd);
    out.Vector(p + "attn_output.bias", embd, kZeros);
    out.Vector(p + "ffn_norm.weight", embd, kOnes);
    out.Vector(p + "ffn_norm.bias", embd, kZeros);
    out.Matrix(p + "ffn_up.weight", embd, s.n_ff);
    out.Vector(p + "ffn_up.bias", s.n_ff, kZeros);
    out.Matrix(p + "ffn_down.weight", s.n_ff, embd);
    out.Vector(p + "ffn_down.bias", embd, kZeros);
  }
}

void SynthGpt2Metadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  w.SetUint32("gpt2.context_length", s.n_ctx);
  w.SetUint32("gpt2.embedding_length", s.n_embd);
  w.SetUint32("gpt2.feed_forward_length", s.n_ff);
  w.SetUint32("gpt2.block_count", s.n_layers);
  w.SetUint32("gpt2.attention.head_count", s.n_heads);
  w.SetFloat32("gpt2.attention.layer_norm_epsilon", s.norm_eps);
}

// GPT-2 small's shape (/work/shared/anchors.md).
const SyntheticRecipe& Gpt2Synthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "ggml-vocab-gpt-2.gguf",
                                      .grouped_kv = false,
                                      .rotary = false,
                                      .always_tied = true,
                                      .tensors = &SynthGpt2Tensors,
                                      .metadata = &SynthGpt2Metadata,
                                      .presets = {{"gpt2-124m",
                                                   {.arch = "gpt2",
                                                    .n_embd = 768,
                                                    .n_layers = 12,
                                                    .n_heads = 12,
                                                    .n_kv_heads = 12,
                                                    .n_ff = 3072,
                                                    .n_ctx = 1024,
                                                    .norm_eps = 1e-5f,
                                                    .tied_output = true}}}};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(gpt2) {
  static const Architecture entry{.gguf_name = "gpt2",
                                  .load = &LoadGpt2,
                                  .hf_classes = {{"GPT2LMHeadModel", "gpt2", &ReadGpt2Config,
                                                  &MapGpt2Tensor, &WriteGpt2Metadata}},
                                  .synthetic = &Gpt2Synthetic()};
  return entry;
}

}  // namespace kvserve
