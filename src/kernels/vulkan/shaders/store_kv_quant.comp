// variants: store_kv_q8_0 KV_Q8_0, store_kv_q4_0 KV_Q4_0
#version 450
// Writes token i's K and V rows (n_kv_heads * head_dim floats each, rows `stride` floats apart)
// to slot slots[i] of the layer's quantized pools, byte for byte as the CPU backend's
// EncodeKvHead (kv/kv_format.cc): per head row the codes of every element, then one f16 scale per
// group of 32 elements (the last one shorter), the scale d = the group's largest magnitude / 127
// (q8_0, NaN skipped as std::fmax) or its value of largest magnitude / -8 (q4_0, the first on
// ties), the code round(x * (1 / d)) (half away from zero, NaN 0) clamped to [-127, 127] or
// [-8, 7] + 8 (q4_0: element 2i in the low nibble of byte i). The divisions are rounded to
// nearest as the CPU's: the device's quotient is corrected by exact fma residuals (div_rn).
// One thread per (token, word): the slot row is slot_bytes bytes from byte dst_*_byte + slot *
// slot_bytes of its binding, and thread u of a token writes the row's bytes in word
// (row start / 4) + u (row_words = slot_bytes / 4 + 2 threads per token cover any alignment).
// A word wholly inside the row is stored; a word shared with a neighbouring slot has only the
// row's bytes replaced (atomicAnd, then atomicOr), so concurrent neighbours keep theirs.
// group.z: 0 = K, 1 = V. Groups: (groups_x, ceil(n_tokens * row_words / (64 * groups_x)), 2).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer SrcK { float src_k[]; };
layout(std430, binding = 1) readonly buffer SrcV { float src_v[]; };
layout(std430, binding = 2) buffer DstK { uint dst_k[]; };
layout(std430, binding = 3) buffer DstV { uint dst_v[]; };
layout(std430, binding = 4) readonly buffer Slots { uint slots[]; };  // int64 each, low word first
layout(push_constant) uniform Params {
  uint n_tokens;
  uint row_words;  // threads per token
  uint slot_bytes;  // bytes of one token's row in a pool: n_kv_heads * head_bytes
  uint head_dim;
  uint head_bytes;  // codes, then scales
  uint code_bytes;
  uint stride;  // floats between a token's source rows
  uint src_k_word;
  uint src_v_word;
  uint dst_k_byte;  // the pool's first byte in dst_k
  uint dst_v_byte;
  uint slots_word;
  uint groups_x;
} p;

#include "div_rn.glsl"
#include "f16.glsl"

const uint kGroup = 32u;

bool is_v;
uint src;  // the token's first source float

float x_at(uint i) { return is_v ? src_v[src + i] : src_k[src + i]; }

// The scale of group g of head row `head`, as EncodeQ8_0 / EncodeQ4_0; cached per thread.
uint cached_group = 0xffffffffu;  // the group's first element in the row
float cached_scale;
float group_scale(uint head, uint g) {
  const uint begin = head * p.head_dim + g * kGroup;
  if (begin == cached_group) return cached_scale;
  const uint end = head * p.head_dim + min(p.head_dim, (g + 1u) * kGroup);
  float amax = 0.0;
  float largest = 0.0;  // q4_0: the value of largest magnitude, with its sign
  for (uint i = begin; i < end; ++i) {
    const float x = x_at(i);
    if (abs(x) > amax) {  // NaN is never larger (std::fmax skips it)
      amax = abs(x);
      largest = x;
    }
  }
#if defined(KV_Q8_0)
  cached_scale = isinf(amax) ? amax : div_rn(amax, 127.0);
#else
  cached_scale = largest * -0.125;  // largest / -8: the same rounding
#endif
  cached_group = begin;
  return cached_scale;
}

// 1 / d as the CPU's `d != 0 && isfinite(d) ? 1 / d : 0`.
float inverse(float d) {
  if (d == 0.0 || isinf(d) || isnan(d)) return 0.0;
  const float r = div_rn(1.0, abs(d));
  return d < 0.0 ? -r : r;
}

// RoundClamped of kv_format.cc: std::round (half away from zero) clamped; NaN gives 0.
int round_clamped(float v, float lo, float hi) {
  if (isnan(v)) return 0;
  float t = trunc(v);
  if (abs(v - t) >= 0.5) t += v < 0.0 ? -1.0 : 1.0;
  return int(clamp(t, lo, hi));
}

// The code of element e of head row `head`.
uint code_of(uint head, uint e) {
  const float id = inverse(group_scale(head, e / kGroup));
  const float v = x_at(head * p.head_dim + e) * id;
#if defined(KV_Q8_0)
  return uint(round_clamped(v, -127.0, 127.0)) & 0xffu;
#else
  return uint(round_clamped(v, -8.0, 7.0) + 8);
#endif
}

// Byte r of the token's slot row.
uint row_byte(uint r) {
  const uint head = r / p.head_bytes;
  const uint at = r % p.head_bytes;
  if (at < p.code_bytes) {
#if defined(KV_Q8_0)
    return code_of(head, at);
#else
    const uint e = 2u * at;
    return code_of(head, e) | (e + 1u < p.head_dim ? code_of(head, e + 1u) << 4 : 0u);
#endif
  }
  const uint s = at - p.code_bytes;
  return (f16_bits(group_scale(head, s / 2u)) >> (8u * (s % 2u))) & 0xffu;
}

void main() {
  const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
  if (id >= p.n_tokens * p.row_words) return;
  const uint token = id / p.row_words;
  const uint unit = id % p.row_words;
  const uint slot = slots[p.slots_word + 2u * token];
  is_v = gl_WorkGroupID.z == 1u;
  src = (is_v ? p.src_v_word : p.src_k_word) + token * p.stride;
  const uint row_start = (is_v ? p.dst_v_byte : p.dst_k_byte) + slot * p.slot_bytes;
  const uint row_end = row_start + p.slot_bytes;
  const uint word = row_start / 4u + unit;
  if (4u * word >= row_end) return;
  uint bits = 0u;
  uint mask = 0u;  // the bytes of this word in the row
  for (uint b = 0u; b < 4u; ++b) {
    const uint at = 4u * word + b;
    if (at < row_start || at >= row_end) continue;
    bits |= row_byte(at - row_start) << (8u * b);
    mask |= 0xffu << (8u * b);
  }
  if (mask == 0xffffffffu) {
    if (is_v) {
      dst_v[word] = bits;
    } else {
      dst_k[word] = bits;
    }
  } else if (is_v) {
    atomicAnd(dst_v[word], ~mask);
    atomicOr(dst_v[word], bits);
  } else {
    atomicAnd(dst_k[word], ~mask);
    atomicOr(dst_k[word], bits);
  }
}
