// Shared by the shaders that round floats to f16 (#include "f16.glsl").
// FloatToFp16 of util/half.h in integers: the same bits for every input.
uint f16_bits(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity
  if (a < 0x38800000u) {
    // Subnormal or zero: the value in units of 2^-24 (mantissa * 2^(e - 126)), to nearest even.
    const uint e = a >> 23;
    if (e < 102u) return sign;  // below 2^-25: rounds to zero
    const uint mantissa = (a & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - e;  // 14 .. 24
    const uint m = mantissa >> shift;
    const uint rest = mantissa & ((1u << shift) - 1u);
    const uint half_unit = 1u << (shift - 1u);
    const bool up = rest > half_unit || (rest == half_unit && (m & 1u) != 0u);
    return sign | (m + (up ? 1u : 0u));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint r = a - (112u << 23);
  const uint dropped = r & 0x1fffu;
  r >>= 13;
  if (dropped > 0x1000u || (dropped == 0x1000u && (r & 1u) != 0u)) ++r;
  return sign | r;
}
