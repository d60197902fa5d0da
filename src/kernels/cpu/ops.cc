#include "kernels/cpu/ops.h"

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
      const float angle = rope.position_scale * (theta / factor);
      const float cos_theta = std::cos(angle);
      const float sin_theta = std::sin(angle);
      const int first = split ? i / 2 : i;
      const float x0 = head[first];
      const float x1 = head[first + second];
      head[first] = x0 * cos_theta - x1 * sin_theta;
      head[first + second] = x0 * sin_theta + x1 * cos_theta;
      theta *= theta_scale;
    }
  }
}

}  // namespace kvserve
