#version 450
// Rotates pair i of every head of row r by the angle whose (cos, sin) the host computed, as the
// CPU backend does (RopeParams), into cos_sin[(r * rope_dims / 2 + i) * 2 + {0, 1}]. Pairs are
// (2i, 2i + 1) or, split, (i, i + rope_dims / 2). One thread per (row, head, pair).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer CosSin { float cos_sin[]; };
layout(push_constant) uniform Params {
  uint n_pairs_total;  // rows * heads * rope_dims / 2
  uint n_heads;
  uint head_dim;
  uint rope_dims;
  uint split;
  uint x_word;
  uint cs_word;
  uint groups_x;
} p;

void main() {
  const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x;
  if (id >= p.n_pairs_total) return;
  const uint half_dims = p.rope_dims / 2u;
  const uint i = id % half_dims;
  const uint h = (id / half_dims) % p.n_heads;
  const uint r = id / (half_dims * p.n_heads);
  const uint head = p.x_word + (r * p.n_heads + h) * p.head_dim;
  const uint first = head + (p.split != 0u ? i : 2u * i);
  const uint second = first + (p.split != 0u ? half_dims : 1u);
  const uint cs = p.cs_word + (r * half_dims + i) * 2u;
  const float c = cos_sin[cs];
  const float s = cos_sin[cs + 1u];
  const float x0 = x[first];
  const float x1 = x[second];
  x[first] = x0 * c - x1 * s;
  x[second] = x0 * s + x1 * c;
}
