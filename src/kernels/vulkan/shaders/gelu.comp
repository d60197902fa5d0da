// variants: gelu OP_GELU, geglu OP_GEGLU
#version 450
// GELU as the CPU backend computes it (kernels/cpu/ops.h GeluInPlace): x <= -10 gives 0, x >= 10
// and NaN pass through, otherwise the f16 table's entry at f16(x) (rounded to nearest even, in
// integers: f16.glsl) widened to float: the CPU's bits. geglu: x = gelu(x) * y. One thread per
// element of x[n]; groups (groups_x, ceil(n / (256 * groups_x))).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Table { uint table[]; };  // 65536 f16, two per word
layout(push_constant) uniform Params {
  uint n;
  uint x_word;
  uint y_word;
  uint table_word;
  uint groups_x;
} p;

#include "f16.glsl"

float gelu(float v) {
  if (v <= -10.0) return 0.0;
  if (!(v < 10.0)) return v;  // >= 10 or NaN
  const uint h = f16_bits(v);
  const uint word = table[p.table_word + (h >> 1)];
  return unpackHalf2x16((h & 1u) != 0u ? word >> 16 : word & 0xffffu).x;
}

void main() {
  const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  const uint xi = p.x_word + i;
#if defined(OP_GELU)
  x[xi] = gelu(x[xi]);
#else
  precise float product = gelu(x[xi]) * y[p.y_word + i];
  x[xi] = product;
#endif
}
