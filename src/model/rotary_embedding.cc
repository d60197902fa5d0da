#include "model/rotary_embedding.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace kvserve {

namespace {

// The pair index at which a pair turns n_rot times over the original context (ggml's
// ggml_rope_yarn_corr_dim, in float as there).
float YarnCorrectionDim(int rope_dims, int original_context, float n_rot, float base) {
  const float pi = std::numbers::pi_v<float>;
  return static_cast<float>(rope_dims) *
         std::log(static_cast<float>(original_context) / (n_rot * 2 * pi)) / (2 * std::log(base));
}

}  // namespace

void ApplyYarn(const ModelConfig& c, RopeParams& p) {
  if (!c.rope_yarn.enabled) return;
  // llama.cpp's defaults: beta_fast 32, beta_slow 1, ext_factor 1.
  constexpr float kBetaFast = 32.0f;
  constexpr float kBetaSlow = 1.0f;
  const int n_ctx = c.rope_yarn.original_context;
  p.ext_factor = 1.0f;
  p.corr_low =
      std::max(0.0f, std::floor(YarnCorrectionDim(p.rope_dims, n_ctx, kBetaFast, p.freq_base)));
  p.corr_high = std::min(static_cast<float>(p.rope_dims - 1),
                         std::ceil(YarnCorrectionDim(p.rope_dims, n_ctx, kBetaSlow, p.freq_base)));
  // llama.cpp's context: attn_factor = get_mscale(factor) / (1 + 0.1 ln factor) (about 1) times
  // rope.scaling.attn_factor; ggml's rope_yarn then multiplies it by 1 + 0.1 ln(1 / freq_scale).
  const float factor = 1.0f / p.position_scale;
  float attn = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
  attn *= 1.0f / (1.0f + 0.1f * std::log(factor));
  attn *= c.rope_yarn.attn_factor;
  p.mscale = attn * (1.0f + 0.1f * std::log(1.0f / p.position_scale));
}

Status RotaryEmbedding::Load(const GgufFile& file, const ModelConfig& c, RopeMode mode,
                             WeightList& weights) {
  const WeightLoader r(file);
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    if (r.Has(name)) {
      return Status::InvalidArgument(file.path() + ": tensor '" + name +
                                     "' (LongRoPE) is not supported");
    }
  }
  params_ = RopeParams{.rope_dims = c.rope_dims,
                       .freq_base = c.rope_freq_base,
                       .mode = mode,
                       .position_scale = c.rope_position_scale};
  ApplyYarn(c, params_);
  if (r.Has("rope_freqs.weight")) {
    KVSERVE_RETURN_IF_ERROR(r.Vector("rope_freqs.weight", c.rope_dims / 2, &freqs_));
  }
  weights.vectors.push_back(&freqs_);
  return Status::Ok();
}

}  // namespace kvserve
