// variants: add OP_ADD, scale OP_SCALE, swiglu OP_SWIGLU, relu OP_RELU, add_bias OP_ADD_BIAS, soft_cap OP_SOFT_CAP, swiglu_oai OP_SWIGLU_OAI
#version 450
// One thread per element i < n = rows * width of x, whose rows are x_stride floats apart: add:
// x += y; scale: x *= factor; swiglu: x = x / (1 + exp(-x)) * y with the CPU's exp polynomial
// (kv_exp.glsl); relu: x = x > 0 ? x : 0 (-0 and NaN give 0); add_bias: x += y[i % width];
// soft_cap: x = tanh(x / factor) * factor (tanh.glsl); swiglu_oai (gpt-oss): with g = min(x,
// limit) and u = clamp(y, -limit, limit), x = g / (1 + exp(-factor * g)) * (u + 1).
// Groups: (groups_x, ceil(n / (256 * groups_x))).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n;
  float factor;
  uint x_word;
  uint y_word;
  uint groups_x;
  uint width;
  uint x_stride;
  float limit;  // swiglu_oai
} p;

#include "kv_exp.glsl"
#include "tanh.glsl"

void main() {
  const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  const uint xi = p.x_word + (i / p.width) * p.x_stride + i % p.width;
#if defined(OP_ADD)
  x[xi] += y[p.y_word + i];
#elif defined(OP_SCALE)
  x[xi] *= p.factor;
#elif defined(OP_RELU)
  x[xi] = x[xi] > 0.0 ? x[xi] : 0.0;
#elif defined(OP_ADD_BIAS)
  x[xi] += y[p.y_word + i % p.width];
#elif defined(OP_SOFT_CAP)
  x[xi] = tanh_accurate(x[xi] * (1.0 / p.factor)) * p.factor;
#elif defined(OP_SWIGLU_OAI)
  const float g = min(x[xi], p.limit);
  const float u = clamp(y[p.y_word + i], -p.limit, p.limit);
  x[xi] = g / (1.0 + exp(p.factor * (-g))) * (u + 1.0);
#else
  const float g = x[xi];
  x[xi] = g / (1.0 + kv_exp(-g)) * y[p.y_word + i];
#endif
}
