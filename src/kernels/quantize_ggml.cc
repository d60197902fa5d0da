#include "kernels/quantize_ggml.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/ggml_type.h"
#include "util/half.h"

namespace kvserve::ggml_encode {

int ClampToInt(float v, int lo, int hi) {
  if (!(v == v)) return 0;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

namespace {

// Round to nearest (ties to even, the default FP environment), then clamp.
int NearestClamped(float v, int lo, int hi) { return ClampToInt(std::nearbyint(v), lo, hi); }

template <typename Block>
void StoreBlock(const Block& b, uint8_t* out, int64_t index) {
  std::memcpy(out + index * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// The element of largest magnitude with its sign (the first one on ties); 0 for an all-zero span.
float SignedMaxMagnitude(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = x[0];
  *max = x[0];
  for (int j = 1; j < n; ++j) {
    *min = std::fmin(*min, x[j]);
    *max = std::fmax(*max, x[j]);
  }
}

// Asymmetric 32-blocks (Q4_1, Q5_1): x = d * q + m with q in [0, levels - 1].
void QuantizeAsym32(const float* x, int levels, uint16_t* d_out, uint16_t* m_out, int q[32]) {
  float min = 0.0f, max = 0.0f;
  MinMax(x, 32, &min, &max);
  const float d = (max - min) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = FloatToFp16(d);
  *m_out = FloatToFp16(min);
  for (int j = 0; j < 32; ++j) q[j] = ClampToInt((x[j] - min) * id + 0.5f, 0, levels - 1);
}

void PackNibbles(const int q[32], uint8_t quants[16]) {
  for (int j = 0; j < 16; ++j) {
    quants[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
  }
}

void PackHighBits(const int q[32], uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &h, 4);
}

}  // namespace

void Q4_1(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ4_1 block{};
    int q[32];
    QuantizeAsym32(x + b * 32, 16, &block.d, &block.m, q);
    PackNibbles(q, block.quants);
    StoreBlock(block, out, b);
  }
}

void Q5_1(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ5_1 block{};
    int q[32];
    QuantizeAsym32(x + b * 32, 32, &block.d, &block.m, q);
    PackNibbles(q, block.quants);
    PackHighBits(q, block.qh);
    StoreBlock(block, out, b);
  }
}

void Q5_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    // The element of largest magnitude, with its sign, maps to -16.
    const float d = SignedMaxMagnitude(v, 32) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 block{};
    block.d = FloatToFp16(d);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = ClampToInt(v[j] * id + 16.5f, 0, 31);
    PackNibbles(q, block.quants);
    PackHighBits(q, block.qh);
    StoreBlock(block, out, b);
  }
}

void Iq4Nl(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    // The extreme element maps to the table's -127; each value then takes the nearest entry, and
    // the scale is refitted by least squares over those entries.
    float d = SignedMaxMagnitude(v, 32) / -127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    double xt = 0.0, tt = 0.0;
    for (int j = 0; j < 32; ++j) {
      const float t = v[j] * id;
      int best = 0;
      for (int i = 1; i < 16; ++i) {
        if (std::fabs(t - kIq4NlValues[i]) < std::fabs(t - kIq4NlValues[best])) best = i;
      }
      q[j] = best;
      xt += static_cast<double>(v[j]) * kIq4NlValues[best];
      tt += static_cast<double>(kIq4NlValues[best]) * kIq4NlValues[best];
    }
    if (d != 0.0f && tt > 0.0 && std::isfinite(xt)) d = static_cast<float>(xt / tt);
    BlockIq4Nl block{};
    block.d = FloatToFp16(d);
    PackNibbles(q, block.quants);
    StoreBlock(block, out, b);
  }
}

namespace {

// The E8M0 exponent llama.cpp's quantize_row_mxfp4_ref writes for a block of largest magnitude
// amax: (uint8_t)(floorf(log2f(amax)) - 2 + 127), 0 for amax = 0. Its float -> uint8_t conversion
// is x86's cvttss2si to int32, then the low byte: below 2^-125 the byte wraps (amax = 2^-130
// gives -5, byte 251), and an infinite amax converts to INT32_MIN, byte 0. log2f is the C
// library's, as llama.cpp's: it rounds values just below a power of two up to the integer
// (amax = nextafter(1024, 0) gives e = 135, where the exact floor would give 134).
uint8_t Mxfp4Exponent(float amax) {
  if (!(amax > 0.0f) || std::isinf(amax)) return 0;
  const float t = std::floor(std::log2(amax)) - 2.0f + 127.0f;  // in [-24, 252]
  return static_cast<uint8_t>(static_cast<int32_t>(t) & 0xff);
}

// The first index of the least |kMxfp4Values[i] * d - x| (llama.cpp's best_index_mxfp4): a tie
// between two magnitudes takes the smaller one, which the table lists first for either sign; a
// NaN x gives 0.
int NearestMxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void Mxfp4(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(v[j])) amax = std::fabs(v[j]);  // NaN never wins
    }
    BlockMxfp4 block{};
    block.e = Mxfp4Exponent(amax);
    const float d = E8M0Half(block.e);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = NearestMxfp4(v[j], d);
    PackNibbles(q, block.quants);
    StoreBlock(block, out, b);
  }
}

namespace {

// The asymmetric K-quants (Q2_K, Q4_K, Q5_K): per sub-block of `sub` elements a scale and a min
// from its range (the min never above 0, as GGML's x = d * sc * q - dmin * m needs m >= 0), both
// quantized to `scale_levels` against the super-block's largest; then each value to the nearest
// of `levels` levels. Writes d, dmin, the integer scales and mins, and q[256].
struct AsymK {
  uint16_t d;
  uint16_t dmin;
  int scales[16];
  int mins[16];
  int q[256];
};

AsymK QuantizeAsymK(const float* x, int sub, int levels, int scale_levels) {
  AsymK r{};
  const int n_sub = 256 / sub;
  float sc[16], mn[16];
  float max_sc = 0.0f, max_mn = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    float min = 0.0f, max = 0.0f;
    MinMax(x + s * sub, sub, &min, &max);
    min = std::fmin(min, 0.0f);
    sc[s] = (max - min) / static_cast<float>(levels - 1);
    mn[s] = -min;
    max_sc = std::fmax(max_sc, sc[s]);
    max_mn = std::fmax(max_mn, mn[s]);
  }
  const float d = max_sc / static_cast<float>(scale_levels - 1);
  const float dmin = max_mn / static_cast<float>(scale_levels - 1);
  r.d = FloatToFp16(d);
  r.dmin = FloatToFp16(dmin);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float idmin = dmin != 0.0f ? 1.0f / dmin : 0.0f;
  const float df = Fp16ToFloat(r.d), dminf = Fp16ToFloat(r.dmin);
  for (int s = 0; s < n_sub; ++s) {
    r.scales[s] = NearestClamped(sc[s] * id, 0, scale_levels - 1);
    r.mins[s] = NearestClamped(mn[s] * idmin, 0, scale_levels - 1);
    const float dl = df * static_cast<float>(r.scales[s]);
    const float ml = dminf * static_cast<float>(r.mins[s]);
    const float il = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int j = 0; j < sub; ++j) {
      r.q[s * sub + j] = NearestClamped((x[s * sub + j] + ml) * il, 0, levels - 1);
    }
  }
  return r;
}

// The symmetric K-quants (Q3_K, Q6_K): per sub-block of 16 a signed scale mapping its extreme
// element to -q_half, quantized to [-scale_half, scale_half - 1] against the super-block's
// extreme scale; then each value to the nearest level in [-q_half, q_half - 1].
struct SymK {
  uint16_t d;
  int scales[16];
  int q[256];
};

SymK QuantizeSymK(const float* x, int q_half, int scale_half) {
  SymK r{};
  float sc[16];
  for (int s = 0; s < 16; ++s) {
    sc[s] = SignedMaxMagnitude(x + 16 * s, 16) / static_cast<float>(-q_half);
  }
  const float ms = SignedMaxMagnitude(sc, 16);
  const float iscale = ms != 0.0f ? static_cast<float>(-scale_half) / ms : 0.0f;
  r.d = FloatToFp16(iscale != 0.0f ? 1.0f / iscale : 0.0f);
  const float df = Fp16ToFloat(r.d);
  for (int s = 0; s < 16; ++s) {
    r.scales[s] = NearestClamped(iscale * sc[s], -scale_half, scale_half - 1);
    const float dl = df * static_cast<float>(r.scales[s]);
    const float il = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int j = 0; j < 16; ++j) {
      r.q[16 * s + j] = NearestClamped(x[16 * s + j] * il, -q_half, q_half - 1);
    }
  }
  return r;
}

// Q4_K/Q5_K: the 6-bit scales and mins of 8 sub-blocks into 12 bytes (ScaleMinK4's inverse).
void PackScaleMinK4(const int scales[8], const int mins[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int s = 0; s < 8; ++s) {
    const int ls = scales[s], lm = mins[s];
    if (s < 4) {
      out[s] = static_cast<uint8_t>(out[s] | ls);
      out[s + 4] = static_cast<uint8_t>(out[s + 4] | lm);
    } else {
      out[s + 4] = static_cast<uint8_t>((ls & 0x0f) | (lm & 0x0f) << 4);
      out[s - 4] = static_cast<uint8_t>(out[s - 4] | (ls >> 4) << 6);
      out[s] = static_cast<uint8_t>(out[s] | (lm >> 4) << 6);
    }
  }
}

// Element e's low 2 bits in the Q2_K/Q3_K layout.
void Pack2Bits(const int q[256], uint8_t quants[64]) {
  std::memset(quants, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int index = 32 * (e / 128) + e % 32;
    quants[index] = static_cast<uint8_t>(quants[index] | (q[e] & 3) << (2 * (e % 128 / 32)));
  }
}

// Q4_K/Q5_K: sub-block 2c in the low nibbles of quants[32c ..], 2c + 1 in the high ones.
void PackK4Nibbles(const int q[256], uint8_t quants[128]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      quants[32 * c + l] =
          static_cast<uint8_t>((q[64 * c + l] & 0x0f) | (q[64 * c + 32 + l] & 0x0f) << 4);
    }
  }
}

}  // namespace

void Q2_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const AsymK r = QuantizeAsymK(x + b * 256, 16, 4, 16);
    BlockQ2_K block{};
    block.d = r.d;
    block.dmin = r.dmin;
    for (int s = 0; s < 16; ++s)
      block.scales[s] = static_cast<uint8_t>(r.scales[s] | r.mins[s] << 4);
    Pack2Bits(r.q, block.quants);
    StoreBlock(block, out, b);
  }
}

void Q3_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const SymK r = QuantizeSymK(x + b * 256, 4, 32);
    BlockQ3_K block{};
    block.d = r.d;
    for (int s = 0; s < 16; ++s) {
      const int v = r.scales[s] + 32;  // [0, 63]
      if (s < 8) {
        block.scales[s] = static_cast<uint8_t>(block.scales[s] | (v & 0x0f));
      } else {
        block.scales[s - 8] = static_cast<uint8_t>(block.scales[s - 8] | (v & 0x0f) << 4);
      }
      block.scales[8 + s % 4] =
          static_cast<uint8_t>(block.scales[8 + s % 4] | (v >> 4) << (2 * (s / 4)));
    }
    int stored[256];
    for (int e = 0; e < 256; ++e) stored[e] = r.q[e] + 4;  // [0, 7]
    Pack2Bits(stored, block.quants);
    for (int e = 0; e < 256; ++e) {
      if (stored[e] >= 4) {
        block.hmask[e % 32] =
            static_cast<uint8_t>(block.hmask[e % 32] | 1 << (4 * (e / 128) + e % 128 / 32));
      }
    }
    StoreBlock(block, out, b);
  }
}

namespace {

// llama.cpp's nearest_int: the float adder's round-half-to-even through the 1.5 * 2^23 bias
// (exact for |v| < 2^22; larger values only meet a clamp).
int NearestIntBiased(float v) {
  const float biased = v + 12582912.0f;
  int32_t bits = 0;
  std::memcpy(&bits, &biased, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// A Q4_K sub-block of 32: llama.cpp's weighted search for a scale and a min (the algorithm of its
// make_qkx2_quants with 15 levels, rmin -1, rdelta 0.1, 20 steps, squared error), every float
// operation in its order so that the bytes are llama-quantize's. Returns the scale, writes -min
// (>= 0) and the levels L.
float FitQ4KSub(const float* x, const float* w, uint8_t L[32], float* neg_min) {
  constexpr int kN = 32, kLevels = 15;
  float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < kN; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + kN, 0);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(kLevels) / (max - min);
  float scale = 1.0f / iscale;
  float best = 0.0f;
  for (int i = 0; i < kN; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestIntBiased(iscale * (x[i] - min)), 0, kLevels));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best += w[i] * (diff * diff);
  }
  uint8_t aux[kN];
  for (int step = 0; step <= 20; ++step) {
    iscale = (-1.0f + 0.1f * static_cast<float>(step) + static_cast<float>(kLevels)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const int l = Clamp(NearestIntBiased(iscale * (x[i] - min)), 0, kLevels);
      aux[i] = static_cast<uint8_t>(l);
      const float lf = static_cast<float>(l);
      sum_l += w[i] * lf;
      sum_l2 += w[i] * lf * lf;
      sum_xl += w[i] * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const float diff = this_scale * static_cast<float>(aux[i]) + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best) {
      std::copy(aux, aux + kN, L);
      best = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// A Q6_K sub-block of 16: llama.cpp's search over 19 scales weighted by x^2 (its make_qx_quants
// with 32 levels each side, rmse_type 1), in its float order. Returns the scale; L = level + 32.
float FitQ6KSub(const float* x, uint8_t L[16]) {
  constexpr int kN = 16, kHalf = 32;
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < kN; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(L, L + kN, 0);
    return 0.0f;
  }
  // The sums of w x l and w l^2 (w = x^2) at `iscale`; `levels` gets L when not null.
  const auto sums = [&](float iscale, float* sumlx, float* suml2, uint8_t* levels) {
    *sumlx = *suml2 = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const int l = Clamp(NearestIntBiased(iscale * x[i]), -kHalf, kHalf - 1);
      if (levels != nullptr) levels[i] = static_cast<uint8_t>(l + kHalf);
      const float w = x[i] * x[i], lf = static_cast<float>(l);
      *sumlx += w * x[i] * lf;
      *suml2 += w * lf * lf;
    }
  };
  float sumlx = 0.0f, suml2 = 0.0f;
  sums(static_cast<float>(-kHalf) / max, &sumlx, &suml2, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float iscale = -(static_cast<float>(kHalf) + 0.1f * static_cast<float>(step)) / max;
    sums(iscale, &sumlx, &suml2, nullptr);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      sums(iscale, &sumlx, &suml2, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

// llama.cpp's quantize_row_q4_K_ref (what llama-quantize writes without an importance matrix):
// per sub-block of 32 the weighted search with w = rms(sub-block) + |x|, scales and mins to 6 bits
// against the largest, then every value rounded against its stored scale and min (a sub-block
// whose stored scale is 0 keeps the search's levels).
void Q4_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + b * 256;
    uint8_t L[256];
    float scales[8], mins[8], weights[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; ++s) {
      const float* xs = v + 32 * s;
      float sum_x2 = 0.0f;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32.0f);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[s] = FitQ4KSub(xs, weights, L + 32 * s, &mins[s]);
      if (scales[s] > max_scale) max_scale = scales[s];
      if (mins[s] > max_min) max_min = mins[s];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    int ls[8], lm[8];
    for (int s = 0; s < 8; ++s) {
      ls[s] = std::min(
          63, static_cast<int>(static_cast<uint8_t>(NearestIntBiased(inv_scale * scales[s]))));
      lm[s] =
          std::min(63, static_cast<int>(static_cast<uint8_t>(NearestIntBiased(inv_min * mins[s]))));
    }
    BlockQ4_K block{};
    block.d = FloatToFp16(max_scale / 63.0f);
    block.dmin = FloatToFp16(max_min / 63.0f);
    PackScaleMinK4(ls, lm, block.scales);
    for (int s = 0; s < 8; ++s) {
      const float d = Fp16ToFloat(block.d) * static_cast<float>(ls[s]);
      if (d == 0.0f) continue;
      const float dm = Fp16ToFloat(block.dmin) * static_cast<float>(lm[s]);
      for (int j = 0; j < 32; ++j) {
        L[32 * s + j] =
            static_cast<uint8_t>(Clamp(NearestIntBiased((v[32 * s + j] + dm) / d), 0, 15));
      }
    }
    int q[256];
    for (int e = 0; e < 256; ++e) q[e] = L[e];
    PackK4Nibbles(q, block.quants);
    StoreBlock(block, out, b);
  }
}

void Q5_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const AsymK r = QuantizeAsymK(x + b * 256, 32, 32, 64);
    BlockQ5_K block{};
    block.d = r.d;
    block.dmin = r.dmin;
    PackScaleMinK4(r.scales, r.mins, block.scales);
    PackK4Nibbles(r.q, block.quants);
    for (int e = 0; e < 256; ++e) {
      block.qh[e % 32] = static_cast<uint8_t>(block.qh[e % 32] | ((r.q[e] >> 4) & 1) << (e / 32));
    }
    StoreBlock(block, out, b);
  }
}

// llama.cpp's quantize_row_q6_K_ref: per sub-block of 16 the searched scale, the scales to 8
// bits against the one of largest magnitude (-128 / it), then every value rounded against its
// stored scale (a sub-block whose stored scale is 0 keeps the search's levels); an all-zero block
// (largest scale below 1e-15) is all zero bytes.
void Q6_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + b * 256;
    uint8_t L[256];
    float scales[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      scales[s] = FitQ6KSub(v + 16 * s, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    BlockQ6_K block{};
    if (!(max_abs_scale < 1e-15f)) {
      const float iscale = -128.0f / max_scale;
      block.d = FloatToFp16(1.0f / iscale);
      for (int s = 0; s < 16; ++s) {
        block.scales[s] = static_cast<int8_t>(std::min(127, NearestIntBiased(iscale * scales[s])));
      }
      for (int s = 0; s < 16; ++s) {
        const float d = Fp16ToFloat(block.d) * static_cast<float>(block.scales[s]);
        if (d == 0.0f) continue;
        for (int j = 0; j < 16; ++j) {
          const int l = Clamp(NearestIntBiased(v[16 * s + j] / d), -32, 31);
          L[16 * s + j] = static_cast<uint8_t>(l + 32);
        }
      }
      for (int e = 0; e < 256; ++e) {
        const int value = L[e], nn = e / 128, j = e % 128 / 32, l = e % 32;
        const int lo = 64 * nn + l + 32 * (j & 1);
        block.ql[lo] = static_cast<uint8_t>(block.ql[lo] | (value & 0x0f) << (4 * (j / 2)));
        block.qh[32 * nn + l] =
            static_cast<uint8_t>(block.qh[32 * nn + l] | (value >> 4) << (2 * j));
      }
    }
    StoreBlock(block, out, b);
  }
}

void Q8_1(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    BlockQ8_1 block{};
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = NearestClamped(v[j] * id, -127, 127);
      block.quants[j] = static_cast<int8_t>(q);
      sum += q;
    }
    block.d = FloatToFp16(d);
    block.s = FloatToFp16(d * static_cast<float>(sum));
    StoreBlock(block, out, b);
  }
}

void Q8_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + b * 256;
    const float max = SignedMaxMagnitude(v, 256);
    BlockQ8_K block{};
    if (max != 0.0f) {
      const float iscale = -127.0f / max;
      for (int j = 0; j < 256; ++j) {
        block.quants[j] = static_cast<int8_t>(NearestClamped(iscale * v[j], -128, 127));
      }
      block.d = 1.0f / iscale;
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += block.quants[16 * s + j];
      block.bsums[s] = static_cast<int16_t>(sum);
    }
    StoreBlock(block, out, b);
  }
}

}  // namespace kvserve::ggml_encode
