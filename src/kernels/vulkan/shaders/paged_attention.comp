// variants: paged_attention_f32 KV_F32, paged_attention_f16 KV_F16, paged_attention_bf16 KV_BF16, paged_attention_q8_0 KV_Q8_0, paged_attention_q4_0 KV_Q4_0
#version 450
// Paged attention (Backend::PagedAttention) of query head h of token i: one workgroup of 64
// threads per (i, h), group number g = i * n_heads + h. The token reads keys first .. end - 1 of
// its sequence (causal: end = position + 1, first = max(0, position - window + 1) with a window;
// non-causal: 0 .. key_count - 1), with KV head h / group, through its sequence's block table.
//
// Keys go in tiles of 64 starting at `first`, so the order depends on the token's own keys only
// (never on the batch or on which physical blocks hold them). Per tile, thread t scores key
// first + 64 * tile + t as the CPU's attend_head does: q · k in 16 lanes (lane d % 16, fma in d
// order), the lanes added by halving (l + 8, + 4, + 2, + 1), times scale; then the position bias
// is added and the soft-cap applied. An online softmax folds the tile in: the tile's maximum
// and sum of exp(score - max) are shared-memory trees of fixed shape (64 leaves; keys past the
// end are -infinity and 0), the running sum and values are rescaled by exp(old max - new max),
// and thread t adds weight * V into dims 4t .. 4t + 3 in key order (fma). The sink (if any)
// starts the running max and joins the sum at the end; out = values / sum.
// K and V are read 4 elements at a time (vec4, or 4 halves or bf16s in a uvec2): the host sends
// only head_dim a multiple of 4 up to 256 (the CPU's limit) and pools starting at a multiple of 4
// elements. q8_0 and q4_0 (kv_format.h) are read by bytes from 32-bit words, any alignment: 4
// codes (4 or 2 bytes, never two groups: 32 is a multiple of 4) times their group's f16 scale,
// exact in float as the CPU's DecodeKvHead, so the arithmetic after is the float types' (the
// CPU's attend_head_quant dequantizes and scores in floats too).
// Groups: (groups_x, ceil(n_tokens * n_heads / groups_x)).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) writeonly buffer Out { float out_values[]; };
#if defined(KV_F32)
layout(std430, binding = 2) readonly buffer K { vec4 k[]; };
layout(std430, binding = 3) readonly buffer V { vec4 v[]; };
#elif defined(KV_Q8_0) || defined(KV_Q4_0)
#define KV_QUANT 1
layout(std430, binding = 2) readonly buffer K { uint k[]; };  // bytes, the lowest first
layout(std430, binding = 3) readonly buffer V { uint v[]; };
#else
layout(std430, binding = 2) readonly buffer K { uvec2 k[]; };  // 4 halves, the lowest first
layout(std430, binding = 3) readonly buffer V { uvec2 v[]; };
#endif
layout(std430, binding = 4) readonly buffer Positions { int positions[]; };
layout(std430, binding = 5) readonly buffer SeqIndex { int seq_index[]; };
// meta[0, n_seq): each sequence's block table, as an index into meta; [n_seq, 2 n_seq): key
// counts (non-causal); [2 n_seq, 2 n_seq + n_heads): the sinks' float bits; then the tables.
layout(std430, binding = 6) readonly buffer Meta { int meta[]; };
layout(std430, binding = 7) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform Params {
  uint n_groups;  // n_tokens * n_heads
  uint n_heads;
  uint head_dim;
  uint group;  // query heads per KV head
  uint block_size;
  uint slot_elements;  // n_kv_heads * head_dim
  float scale;
  int window;  // 0 = none
  float soft_cap;  // 0 = none
  float inv_soft_cap;  // 1 / soft_cap, rounded on the host as the CPU does
  uint flags;  // 1: causal, 2: sinks, 4: position bias
  int bias_width;
  int bias_zero;
  uint q_word;
  uint out_word;
  uint k_quad;  // the K pool's first element in k, in units of 4 elements (quantized: bytes)
  uint v_quad;
  uint positions_word;
  uint seq_word;
  uint meta_word;
  uint n_seq;
  uint bias_word;
  uint groups_x;
  uint slot_bytes;  // quantized: bytes of a slot (n_kv_heads * head_bytes)
  uint head_bytes;  // quantized: bytes of a head row, codes then scales
  uint code_bytes;  // quantized: bytes of a head row's codes
} p;

const uint kTile = 64u;
const uint kMaxHeadDim = 256u;

shared vec4 q_shared[kMaxHeadDim / 4u];
shared float weights[kTile];  // the tile's exp(score - max)
shared uint rows[kTile];  // the tile's head rows: offsets in the pools, units of 4 (quantized: bytes)
shared float max_tree[kTile];
shared float sum_tree[kTile];

#if defined(KV_QUANT)
// n (1 .. 4) bytes of K (or V) from byte `at`, the lowest first.
uint read_bytes(bool from_v, uint at, uint n) {
  const uint w = at / 4u;
  const uint shift = 8u * (at % 4u);
  uint bits = (from_v ? v[w] : k[w]) >> shift;
  if (shift + 8u * n > 32u) bits |= (from_v ? v[w + 1u] : k[w + 1u]) << (32u - shift);
  return n == 4u ? bits : bits & ((1u << (8u * n)) - 1u);
}

// Elements 4i .. 4i + 3 of the head row at byte `row`: scale * code, exact.
vec4 dequantize(bool from_v, uint row, uint i) {
  const float d = unpackHalf2x16(read_bytes(from_v, row + p.code_bytes + 2u * (i / 8u), 2u)).x;
#if defined(KV_Q8_0)
  const int c = int(read_bytes(from_v, row + 4u * i, 4u));
  const ivec4 codes = ivec4(bitfieldExtract(c, 0, 8), bitfieldExtract(c, 8, 8),
                            bitfieldExtract(c, 16, 8), bitfieldExtract(c, 24, 8));
#else
  const uint c = read_bytes(from_v, row + 2u * i, 2u);
  const ivec4 codes = ivec4(c & 15u, (c >> 4) & 15u, (c >> 8) & 15u, c >> 12) - 8;
#endif
  return d * vec4(codes);
}
#endif

// Elements 4i .. 4i + 3 of the head row at `row` (a rows[] value).
vec4 load_k(uint row, uint i) {
#if defined(KV_F32)
  return k[p.k_quad + row + i];
#elif defined(KV_QUANT)
  return dequantize(false, p.k_quad + row, i);
#else
  const uvec2 pair = k[p.k_quad + row + i];
#if defined(KV_F16)
  return vec4(unpackHalf2x16(pair.x), unpackHalf2x16(pair.y));
#else
  return uintBitsToFloat(uvec4(pair.x << 16, pair.x & 0xffff0000u, pair.y << 16,
                               pair.y & 0xffff0000u));
#endif
#endif
}

vec4 load_v(uint row, uint i) {
#if defined(KV_F32)
  return v[p.v_quad + row + i];
#elif defined(KV_QUANT)
  return dequantize(true, p.v_quad + row, i);
#else
  const uvec2 pair = v[p.v_quad + row + i];
#if defined(KV_F16)
  return vec4(unpackHalf2x16(pair.x), unpackHalf2x16(pair.y));
#else
  return uintBitsToFloat(uvec4(pair.x << 16, pair.x & 0xffff0000u, pair.y << 16,
                               pair.y & 0xffff0000u));
#endif
#endif
}

#include "kv_exp.glsl"
#include "tanh.glsl"


// q · k of the head row at `row` (a rows[] value) in the CPU's 16 lanes:
// lanes0 holds lanes 0 .. 3 (elements d with d % 16 < 4), lanes1 lanes 4 .. 7, ...
float dot_q_k(uint row) {
  const uint quads = p.head_dim / 4u;
  vec4 lanes0 = vec4(0.0);
  vec4 lanes1 = vec4(0.0);
  vec4 lanes2 = vec4(0.0);
  vec4 lanes3 = vec4(0.0);
  uint i = 0u;
  for (; i + 4u <= quads; i += 4u) {
    lanes0 = fma(q_shared[i], load_k(row, i), lanes0);
    lanes1 = fma(q_shared[i + 1u], load_k(row, i + 1u), lanes1);
    lanes2 = fma(q_shared[i + 2u], load_k(row, i + 2u), lanes2);
    lanes3 = fma(q_shared[i + 3u], load_k(row, i + 3u), lanes3);
  }
  if (i < quads) lanes0 = fma(q_shared[i], load_k(row, i), lanes0);
  if (i + 1u < quads) lanes1 = fma(q_shared[i + 1u], load_k(row, i + 1u), lanes1);
  if (i + 2u < quads) lanes2 = fma(q_shared[i + 2u], load_k(row, i + 2u), lanes2);
  const vec4 eight = lanes0 + lanes2;     // lanes l + 8 (l < 4)
  const vec4 eight_hi = lanes1 + lanes3;  // lanes 4 + l + 8
  const vec4 four = eight + eight_hi;
  const vec2 two = four.xy + four.zw;
  return two.x + two.y;
}

void main() {
  const uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
  if (g >= p.n_groups) return;  // the whole group leaves: no barrier is skipped by part of it
  const uint t = gl_LocalInvocationID.x;
  const uint token = g / p.n_heads;
  const uint h = g % p.n_heads;
  const int position = positions[p.positions_word + token];
  const int seq = seq_index[p.seq_word + token];
  const uint table = p.meta_word + uint(meta[p.meta_word + uint(seq)]);
  const bool causal = (p.flags & 1u) != 0u;
  int first = 0;
  int end = position + 1;
  if (!causal) {
    end = meta[p.meta_word + p.n_seq + uint(seq)];
  } else if (p.window > 0) {
    first = max(0, position - p.window + 1);
  }
  const uint quads = p.head_dim / 4u;
  const uint kv_head_quad = (h / p.group) * quads;
  if (t < quads) {
    const uint at = p.q_word + g * p.head_dim + 4u * t;
    q_shared[t] = vec4(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
  }
  const float sink = (p.flags & 2u) != 0u
                         ? intBitsToFloat(meta[p.meta_word + 2u * p.n_seq + h])
                         : uintBitsToFloat(0xff800000u);  // -infinity: none
  const int bias_base = int(p.bias_word) + int(h) * p.bias_width + p.bias_zero - position;
  float running_max = sink;
  float running_sum = 0.0;
  vec4 acc = vec4(0.0);  // dims 4t .. 4t + 3
  barrier();  // q_shared is written

  for (int base = first; base < end; base += int(kTile)) {
    const int key = base + int(t);
    float score = uintBitsToFloat(0xff800000u);
    if (key < end) {
      const uint block = uint(meta[table + uint(key) / p.block_size]);
      const uint slot = block * p.block_size + uint(key) % p.block_size;
#if defined(KV_QUANT)
      const uint row = slot * p.slot_bytes + (h / p.group) * p.head_bytes;
#else
      const uint row = slot * (p.slot_elements / 4u) + kv_head_quad;
#endif
      rows[t] = row;
      score = dot_q_k(row) * p.scale;
      if ((p.flags & 4u) != 0u) score = score + bias[bias_base + key];
      if (p.soft_cap > 0.0) score = tanh_accurate(score * p.inv_soft_cap) * p.soft_cap;
    }
    max_tree[t] = score;
    barrier();
    for (uint width = kTile / 2u; width > 0u; width >>= 1) {
      if (t < width) max_tree[t] = max(max_tree[t], max_tree[t + width]);
      barrier();
    }
    const float new_max = max(running_max, max_tree[0]);
    const float rescale = kv_exp(running_max - new_max);
    const float w = kv_exp(score - new_max);
    weights[t] = w;
    sum_tree[t] = w;
    barrier();
    for (uint width = kTile / 2u; width > 0u; width >>= 1) {
      if (t < width) sum_tree[t] = sum_tree[t] + sum_tree[t + width];
      barrier();
    }
    running_sum = running_sum * rescale + sum_tree[0];
    running_max = new_max;
    const uint n = uint(min(int(kTile), end - base));
    if (t < quads) {
      acc *= rescale;
      for (uint j = 0u; j < n; ++j) acc = fma(vec4(weights[j]), load_v(rows[j], t), acc);
    }
    barrier();  // the tile's weights and rows are read before the next tile writes them
  }

  const float inv_sum = 1.0 / (running_sum + kv_exp(sink - running_max));
  if (t < quads) {
    const vec4 result = acc * inv_sum;
    const uint at = p.out_word + g * p.head_dim + 4u * t;
    out_values[at] = result.x;
    out_values[at + 1u] = result.y;
    out_values[at + 2u] = result.z;
    out_values[at + 3u] = result.w;
  }
}
