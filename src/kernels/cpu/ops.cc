#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>
#include "kernels/rope_angles.h"
#include "util/half.h"

namespace kvserve {

namespace {

// Sums in double of v[i] (kSquares false) or of the float products v[i] * v[i] (true), i < n, in
// kChains interleaved chains (chain c takes i = c, c + kChains, ...) added pairwise at the end.
// One chain in order, as GGML sums, made every norm wait on the adder's latency (gpt2-124m BF16
// pp128 on a Zen 5 VM: 14-16 us of layer norms per token against 5-7 with eight chains). Each term
// is exact in double, and so is any sum of n of them (in any order) unless their magnitudes span
// more than about 2^(29 - log2 n): the chains' sum then rounds to the float one chain gives, and
// otherwise it differs from it by a double's rounding, which the cast to float almost always
// removes.
template <bool kSquares>
double SumInDouble(const float* v, int n) {
  constexpr int kChains = 8;
  double chain[kChains] = {};
  int i = 0;
  for (; i + kChains <= n; i += kChains) {
    for (int c = 0; c < kChains; ++c) {
      const float term = kSquares ? v[i + c] * v[i + c] : v[i + c];
      chain[c] += static_cast<double>(term);
    }
  }
  for (int c = 0; i < n; ++i, ++c) {
    const float term = kSquares ? v[i] * v[i] : v[i];
    chain[c] += static_cast<double>(term);
  }
  for (int width = kChains / 2; width > 0; width /= 2) {
    for (int c = 0; c < width; ++c) chain[c] += chain[c + width];
  }
  return chain[0];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int n, float eps, float* out) {
  const float mean = static_cast<float>(SumInDouble<true>(x, n) / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void LayerNorm(const float* x, const float* weight, const float* bias, int n, float eps,
               float* out) {
  const float mean = static_cast<float>(SumInDouble<false>(x, n) / n);
  for (int i = 0; i < n; ++i) out[i] = x[i] - mean;
  const float variance = static_cast<float>(SumInDouble<true>(out, n) / n);
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

// The angles once per row (rope_angles.h), then every head's pairs turned by them.
void RopeInPlace(float* x, int n_heads, int head_dim, const RopeParams& rope, int32_t pos) {
  const int rope_dims = rope.rope_dims;
  float stack_angles[256];
  std::vector<float> heap_angles;
  float* cos_sin = stack_angles;
  if (rope_dims > 256) {
    heap_angles.resize(rope_dims);
    cos_sin = heap_angles.data();
  }
  RopeCosSin(rope, pos, cos_sin);
  // Offset of a pair's second value from its first, and of pair i's first value from 2i.
  const bool split = rope.mode == RopeMode::kSplitHalves;
  const int second = split ? rope_dims / 2 : 1;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (int i = 0; i < rope_dims; i += 2) {
      const int first = split ? i / 2 : i;
      const float x0 = head[first];
      const float x1 = head[first + second];
      head[first] = x0 * cos_sin[i] - x1 * cos_sin[i + 1];
      head[first + second] = x0 * cos_sin[i + 1] + x1 * cos_sin[i];
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
