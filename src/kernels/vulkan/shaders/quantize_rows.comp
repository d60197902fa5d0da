// variants: quantize_q8_0 X_Q8_0, quantize_q8_1 X_Q8_1, quantize_q8_k X_Q8_K
#version 450
// Rounds rows of floats to the 8-bit activation blocks the quantized matmul shaders read, byte
// for byte as the CPU backend's quantizers (VulkanBackend::QuantizeInput): the rows are
// contiguous in x and in the output, so block f of the flat sequence is elements 32 f .. 32 f + 31
// (256 for Q8_K) and bytes block_bytes * f of the output.
// - Q8_0 (34 bytes: f16 d, 32 codes; QuantizeRowQ8_0): amax = the largest magnitude, d = amax /
//   127, id = d != 0 ? 1 / d : 0, code = x * id to nearest even.
// - Q8_1 (36 bytes: f16 d, f16 s, 32 codes; ggml_encode::Q8_1): d = amax / 127, id = amax != 0 ?
//   127 / amax : 0, code = x * id to nearest even clamped to [-127, 127] (NaN 0), s = f16(d * the
//   codes' sum).
// - Q8_K (292 bytes: f32 d, 256 codes, 16 int16 sums; ggml_encode::Q8_K): max = the element of
//   largest magnitude (the first on ties), iscale = -127 / max, code = iscale * x to nearest even
//   clamped to [-128, 127] (NaN 0), d = 1 / iscale, sums of each 16 codes; all zero when max is 0.
// The divisions are rounded to nearest as the CPU's (div_rn.glsl), the products are single
// roundings (precise), f16 as FloatToFp16 (f16.glsl).
// One thread per block (Q8_1, Q8_K: whole words) or per pair of blocks (Q8_0: 68 bytes, 17 words;
// the last pair of an odd count writes its first block and half a word past it, within the
// binding). Groups: (groups_x, ceil(threads / (64 * groups_x)), 1).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Out { uint out_words[]; };
layout(push_constant) uniform Params {
  uint n_blocks;  // blocks in all the rows
  uint x_word;
  uint out_word;
  uint groups_x;
} p;

#include "div_rn.glsl"
#include "f16.glsl"

#if defined(X_Q8_K)
const uint kBlock = 256u;
#else
const uint kBlock = 32u;
#endif

float x_at(uint block, uint j) { return x[p.x_word + block * kBlock + j]; }

// The largest magnitude of a block (NaN never counts, as std::fmax and the SIMD max skip it).
float block_amax(uint block) {
  float amax = 0.0;
  for (uint j = 0u; j < kBlock; ++j) {
    const float a = abs(x_at(block, j));
    if (a > amax) amax = a;
  }
  return amax;
}

// a / b rounded to nearest for finite a, any signs; b = +-0 or +-inf as IEEE (a signed infinity
// or zero: the ones a block with an infinite element reaches).
float div_signed(float a, float b) {
  const bool negative = ((floatBitsToUint(a) ^ floatBitsToUint(b)) >> 31u) != 0u;
  float q;
  if (isinf(b)) {
    q = 0.0;
  } else if (b == 0.0) {
    q = uintBitsToFloat(0x7f800000u);
  } else {
    q = div_rn(abs(a), abs(b));
  }
  return negative ? -q : q;
}

// v to nearest even, clamped to [lo, hi]; NaN gives 0 (ClampToInt of quantize_ggml.cc).
int nearest_clamped(float v, float lo, float hi) {
  if (isnan(v)) return 0;
  return int(clamp(roundEven(v), lo, hi));
}

uint byte_of(int code) { return uint(code) & 0xffu; }

#if defined(X_Q8_0)
// Block f's 34 bytes: byte i of the block is returned by block_byte(i).
float q8_0_id;
uint q8_0_scale;
void q8_0_begin(uint block) {
  const float amax = block_amax(block);
  const float d = isinf(amax) ? amax : div_rn(amax, 127.0);
  q8_0_id = d != 0.0 ? div_signed(1.0, d) : 0.0;
  q8_0_scale = f16_bits(d);
}
uint q8_0_byte(uint block, uint i) {
  if (i < 2u) return (q8_0_scale >> (8u * i)) & 0xffu;
  precise float v = x_at(block, i - 2u) * q8_0_id;
  // The CPU's conversion of nearbyint(v) to int8: the SIMD tables saturate.
  return byte_of(nearest_clamped(v, -128.0, 127.0));
}

void main() {
  const uint pair = gl_WorkGroupID.y * p.groups_x * 64u + gl_GlobalInvocationID.x;
  const uint first = 2u * pair;
  if (first >= p.n_blocks) return;
  const uint blocks = min(2u, p.n_blocks - first);
  uint word = 0u;
  uint b = first;
  q8_0_begin(b);
  for (uint i = 0u; i < 68u; ++i) {
    uint value = 0u;
    if (i == 34u) {
      if (blocks == 1u) {
        out_words[p.out_word + 17u * pair + i / 4u] = word;  // the last half word
        return;
      }
      b = first + 1u;
      q8_0_begin(b);
    }
    value = q8_0_byte(b, i % 34u);
    word |= value << (8u * (i % 4u));
    if (i % 4u == 3u) {
      out_words[p.out_word + 17u * pair + i / 4u] = word;
      word = 0u;
    }
  }
}

#elif defined(X_Q8_1)
void main() {
  const uint block = gl_WorkGroupID.y * p.groups_x * 64u + gl_GlobalInvocationID.x;
  if (block >= p.n_blocks) return;
  const float amax = block_amax(block);
  const float d = isinf(amax) ? amax : div_rn(amax, 127.0);
  const float id = amax != 0.0 ? div_signed(127.0, amax) : 0.0;
  const uint base = p.out_word + 9u * block;
  int sum = 0;
  for (uint w = 0u; w < 8u; ++w) {
    uint word = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      precise float v = x_at(block, 4u * w + k) * id;
      const int code = nearest_clamped(v, -127.0, 127.0);
      sum += code;
      word |= byte_of(code) << (8u * k);
    }
    out_words[base + 1u + w] = word;
  }
  precise float s = d * float(sum);
  out_words[base] = f16_bits(d) | (f16_bits(s) << 16u);
}

#else  // X_Q8_K
void main() {
  const uint block = gl_WorkGroupID.y * p.groups_x * 64u + gl_GlobalInvocationID.x;
  if (block >= p.n_blocks) return;
  float amax = 0.0;
  float max_value = 0.0;  // the value of largest magnitude, the first on ties
  for (uint j = 0u; j < kBlock; ++j) {
    const float v = x_at(block, j);
    if (abs(v) > amax) {
      amax = abs(v);
      max_value = v;
    }
  }
  const uint base = p.out_word + 73u * block;
  if (max_value == 0.0) {
    for (uint w = 0u; w < 73u; ++w) out_words[base + w] = 0u;
    return;
  }
  const float iscale = div_signed(-127.0, max_value);
  for (uint s = 0u; s < 16u; ++s) {
    int sum = 0;
    for (uint w = 0u; w < 4u; ++w) {
      uint word = 0u;
      for (uint k = 0u; k < 4u; ++k) {
        precise float v = iscale * x_at(block, 16u * s + 4u * w + k);
        const int code = nearest_clamped(v, -128.0, 127.0);
        sum += code;
        word |= byte_of(code) << (8u * k);
      }
      out_words[base + 1u + 4u * s + w] = word;
    }
    // bsums[s]: int16 s of the 8 words after the codes.
    const uint at = base + 65u + s / 2u;
    const uint half_word = uint(sum) & 0xffffu;
    if (s % 2u == 0u) {
      out_words[at] = half_word;
    } else {
      out_words[at] |= half_word << 16u;
    }
  }
  out_words[base] = floatBitsToUint(div_signed(1.0, iscale));
}
#endif
