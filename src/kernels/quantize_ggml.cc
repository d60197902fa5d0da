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

void Q4_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const AsymK r = QuantizeAsymK(x + b * 256, 32, 16, 64);
    BlockQ4_K block{};
    block.d = r.d;
    block.dmin = r.dmin;
    PackScaleMinK4(r.scales, r.mins, block.scales);
    PackK4Nibbles(r.q, block.quants);
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

void Q6_K(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const SymK r = QuantizeSymK(x + b * 256, 32, 128);
    BlockQ6_K block{};
    block.d = r.d;
    for (int s = 0; s < 16; ++s) block.scales[s] = static_cast<int8_t>(r.scales[s]);
    for (int e = 0; e < 256; ++e) {
      const int v = r.q[e] + 32;  // [0, 63]
      const int nn = e / 128, j = e % 128 / 32, l = e % 32;
      const int lo = 64 * nn + l + 32 * (j & 1);
      block.ql[lo] = static_cast<uint8_t>(block.ql[lo] | (v & 0x0f) << (4 * (j / 2)));
      block.qh[32 * nn + l] = static_cast<uint8_t>(block.qh[32 * nn + l] | (v >> 4) << (2 * j));
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
