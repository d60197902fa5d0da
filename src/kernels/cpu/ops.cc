#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>
#include "util/half.h"

namespace kvserve {

void RmsNorm(const float* x, const float* weight, int n, float eps, float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void LayerNorm(const float* x, const float* weight, const float* bias, int n, float eps,
               float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / n);
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const float centered = x[i] - mean;
    out[i] = centered;
    sum_sq += static_cast<double>(centered * centered);
  }
  const float variance = static_cast<float>(sum_sq / n);
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int i = 0; i < n; ++i) out[i] = out[i] * scale * weight[i] + bias[i];
}

namespace {

float GeluTanh(float v) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kCoef * v * v)));
}

// GELU of every f16 value, rounded to f16: GGML evaluates GELU this way, and matching it keeps our
// logits within float rounding of llama.cpp's.
}  // namespace

const uint16_t* GeluF16Table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536 + 1);
    for (uint32_t h = 0; h < 65536; ++h) {
      t[h] = FloatToFp16(GeluTanh(Fp16ToFloat(static_cast<uint16_t>(h))));
    }
    return t;
  }();
  return table.data();
}

void GeluInPlace(const KernelTable& kernels, float* x, int n) {
  kernels.gelu_f16_table(GeluF16Table(), x, n);
}

void SwiGluInPlace(const KernelTable& kernels, float* gate, const float* up, int n) {
  kernels.swiglu(gate, up, n);
}

void AddInPlace(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

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

void RopeInPlace(float* x, int n_heads, int head_dim, const RopeParams& rope, int32_t pos) {
  const int rope_dims = rope.rope_dims;
  const float theta_scale = std::pow(rope.freq_base, -2.0f / static_cast<float>(rope_dims));
  // Offset of a pair's second value from its first, and of pair i's first value from 2i.
  const bool split = rope.mode == RopeMode::kSplitHalves;
  const int second = split ? rope_dims / 2 : 1;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    float theta = static_cast<float>(pos);
    for (int i = 0; i < rope_dims; i += 2) {
      const float factor = rope.freq_factors != nullptr ? rope.freq_factors[i / 2] : 1.0f;
      float cos_theta = 0.0f;
      float sin_theta = 0.0f;
      PairRotation(rope, theta / factor, i / 2, &cos_theta, &sin_theta);
      const int first = split ? i / 2 : i;
      const float x0 = head[first];
      const float x1 = head[first + second];
      head[first] = x0 * cos_theta - x1 * sin_theta;
      head[first + second] = x0 * sin_theta + x1 * cos_theta;
      theta *= theta_scale;
    }
  }
}

void SwiGluOaiInPlace(float* gate, const float* up, int n, float alpha, float limit) {
  for (int i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(alpha * (-g))) * (u + 1.0f);
  }
}

}  // namespace kvserve
