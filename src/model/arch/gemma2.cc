// The gemma2 architecture (Gemma 2): the Gemma decoder (gemma_decoder.h) with attention logit
// soft-capping (attn_logit_softcapping) on every layer and a final logit soft-cap
// (final_logit_softcapping); even layers (0, 2, ...) attend over a sliding window
// (attention.sliding_window), odd layers globally; one RoPE (split halves) for all layers.
//
// Hugging Face: Gemma2ForCausalLM (llama's keys with head_dim, sliding_window,
// query_pre_attn_scalar equal to head_dim, hidden_activation gelu_pytorch_tanh and both
// soft-caps); norm weights w are stored as 1 + w, lm_head is the embedding.
#include <string>

#include "model/architecture.h"
#include "model/gemma_decoder.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadGemma2(GgufFile file, ModelConfig config,
                                          const Backend& backend) {
  KVSERVE_RETURN_IF_ERROR(config.ReadRopeScaling(file));
  const std::string& a = config.arch;
  // llama.cpp's defaults where a key is missing (Gemma 2's released values).
  auto window = file.GetUintOr(a + ".attention.sliding_window", 4096);
  auto attn_cap = file.GetFloatOr(a + ".attn_logit_softcapping", 50.0);
  auto final_cap = file.GetFloatOr(a + ".final_logit_softcapping", 30.0);
  if (!window.ok()) return window.status();
  if (!attn_cap.ok()) return attn_cap.status();
  if (!final_cap.ok()) return final_cap.status();
  const RopeParams rope{.rope_dims = config.rope_dims,
                        .freq_base = config.rope_freq_base,
                        .mode = RopeMode::kSplitHalves,
                        .position_scale = config.rope_position_scale};
  GemmaOptions options{.final_soft_cap = static_cast<float>(*final_cap)};
  for (int i = 0; i < config.n_layers; ++i) {
    options.layers.push_back({.window = i % 2 == 0 ? static_cast<int>(*window) : 0,
                              .rope = rope,
                              .soft_cap = static_cast<float>(*attn_cap)});
  }
  return LoadGemma(std::move(file), std::move(config), backend, std::move(options));
}

Status ReadGemma2Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(
      ReadHfDecoderConfig(r, {.head_dim_always = true, .tied = true, .gelu = true}, c));
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &c.sliding_window));
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber(
      "query_pre_attn_scalar", c.head_dim,
      "kvserve scales queries by 1/sqrt(head_dim " + std::to_string(c.head_dim) + ")"));
  KVSERVE_RETURN_IF_ERROR(r.Float("attn_logit_softcapping", &c.attn_softcap, true));
  return r.Float("final_logit_softcapping", &c.final_softcap, true);
}

Result<HfMapping> MapGemma2Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{
      .layer = GemmaLayerNames(), .norm_plus_one = true, .lm_head_tied = true};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteGemma2Metadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {.rope_dimension_count = false}, w);
  w.SetFloat32("gemma2.attn_logit_softcapping", static_cast<float>(c.attn_softcap));
  w.SetFloat32("gemma2.final_logit_softcapping", static_cast<float>(c.final_softcap));
}

}  // namespace

KVSERVE_ARCHITECTURE(gemma2) {
  static const Architecture entry{.gguf_name = "gemma2",
                                  .load = &LoadGemma2,
                                  .hf_classes = {{"Gemma2ForCausalLM", "gemma2", &ReadGemma2Config,
                                                  &MapGemma2Tensor, &WriteGemma2Metadata}}};
  return entry;
}

}  // namespace kvserve
