// IEEE half (f16) and bfloat16 conversions, scalar and exact: round to nearest even on the way
// down, exact on the way up. Kernels use the hardware instructions where available; these are the
// reference and are used wherever a single value is converted.
#pragma once

#include <cstdint>
#include <cstring>

namespace kvserve {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000 | (mantissa << 13));  // inf, nan
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal: value = mantissa * 2^-24.
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t FloatToFp16(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // nan
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (abs < 0x38800000) {
    // Result is subnormal or zero: scale so the integer part is the f16 mantissa, then round.
    // 0.5f * 2^-24 and below round to zero (ties to even at exactly half).
    const float magnitude = BitsToFloat(abs);
    const float scaled = magnitude * 16777216.0f;  // in units of 2^-24
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t rebased = abs - (112u << 23);
  const uint32_t round_bit = 1u << 12;
  const uint32_t dropped = rebased & 0x1fff;
  rebased >>= 13;
  if (dropped > round_bit || (dropped == round_bit && (rebased & 1))) ++rebased;
  return static_cast<uint16_t>(sign | rebased);
}

inline float Bf16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBf16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace kvserve
