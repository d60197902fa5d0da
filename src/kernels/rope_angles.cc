#include "kernels/rope_angles.h"

#include <algorithm>
#include <cmath>

namespace kvserve {

namespace {

// One pair's rotation: cos and sin of its angle, times mscale. theta_extrap = pos *
// base^(-2i / rope_dims) / freq_factors[i]; pair_index i.
void PairRotation(const RopeParams& rope, float theta_extrap, int pair_index, float* cos_theta,
                  float* sin_theta) {
  const float theta_interp = rope.position_scale * theta_extrap;
  float theta = theta_interp;
  if (rope.ext_factor != 0.0f) {
    const float y = (static_cast<float>(pair_index) - rope.corr_low) /
                    std::max(0.001f, rope.corr_high - rope.corr_low);
    const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * rope.ext_factor;
    theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
  }
  *cos_theta = std::cos(theta) * rope.mscale;
  *sin_theta = std::sin(theta) * rope.mscale;
}

}  // namespace

void RopeCosSin(const RopeParams& rope, int32_t pos, float* cos_sin) {
  const float theta_scale = std::pow(rope.freq_base, -2.0f / static_cast<float>(rope.rope_dims));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < rope.rope_dims / 2; ++i) {
    const float factor = rope.freq_factors != nullptr ? rope.freq_factors[i] : 1.0f;
    PairRotation(rope, theta / factor, i, &cos_sin[2 * i], &cos_sin[2 * i + 1]);
    theta *= theta_scale;
  }
}

}  // namespace kvserve
