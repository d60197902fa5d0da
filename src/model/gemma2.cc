// The gemma2 architecture (Gemma 2): the Gemma decoder (gemma_decoder.h) with attention logit
// soft-capping (attn_logit_softcapping) on every layer and a final logit soft-cap
// (final_logit_softcapping); even layers (0, 2, ...) attend over a sliding window
// (attention.sliding_window), odd layers globally; one RoPE (split halves) for all layers.
#include <string>

#include "model/architectures.h"
#include "model/gemma_decoder.h"

namespace kvserve {

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

}  // namespace kvserve
