// variants: store_kv_f32 KV_F32, store_kv_f16 KV_F16, store_kv_bf16 KV_BF16
#version 450
// Writes token i's K and V rows (row_elements floats each, rows `stride` floats apart) to slot
// slots[i] of the layer's pools, rounding to the KV type as the CPU backend does: f32 copies, f16
// rounds to nearest even exactly as FloatToFp16 (util/half.h), bf16 as FloatToBf16 (NaN kept
// quiet), two elements per 32-bit word (the host sends f16 and bf16 here only when row_elements
// is even). One thread per (token, unit): a unit is one element (f32) or one word of two elements
// (f16, bf16); row_units units per row. group.z: 0 = K, 1 = V. (q8_0, q4_0: store_kv_quant.comp.)
// Groups: (groups_x, ceil(n_tokens * row_units / (64 * groups_x)), 2).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer SrcK { float src_k[]; };
layout(std430, binding = 1) readonly buffer SrcV { float src_v[]; };
layout(std430, binding = 2) writeonly buffer DstK { uint dst_k[]; };
layout(std430, binding = 3) writeonly buffer DstV { uint dst_v[]; };
layout(std430, binding = 4) readonly buffer Slots { uint slots[]; };  // int64 each, low word first
layout(push_constant) uniform Params {
  uint n_tokens;
  uint row_units;  // units (words) of one token's row in a pool
  uint stride;     // floats between a token's source rows
  uint src_k_word;
  uint src_v_word;
  uint dst_k_word;  // the pool's first word in dst_k
  uint dst_v_word;
  uint slots_word;
  uint groups_x;
} p;

#include "f16.glsl"

// FloatToBf16 of util/half.h: the same bits for every input.
uint bf16_bits(float f) {
  const uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;  // quiet NaN
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

void main() {
  const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
  if (id >= p.n_tokens * p.row_units) return;
  const uint token = id / p.row_units;
  const uint unit = id % p.row_units;
  const uint slot = slots[p.slots_word + 2u * token];
  const bool is_v = gl_WorkGroupID.z == 1u;
  const uint src = (is_v ? p.src_v_word : p.src_k_word) + token * p.stride;
  const uint dst = (is_v ? p.dst_v_word : p.dst_k_word) + slot * p.row_units + unit;
#if defined(KV_F32)
  const uint bits = floatBitsToUint(is_v ? src_v[src + unit] : src_k[src + unit]);
#else
  const uint e = src + 2u * unit;
  const float lo = is_v ? src_v[e] : src_k[e];
  const float hi = is_v ? src_v[e + 1u] : src_k[e + 1u];
#if defined(KV_F16)
  const uint bits = f16_bits(lo) | (f16_bits(hi) << 16);
#else
  const uint bits = bf16_bits(lo) | (bf16_bits(hi) << 16);
#endif
#endif
  if (is_v) {
    dst_v[dst] = bits;
  } else {
    dst_k[dst] = bits;
  }
}
