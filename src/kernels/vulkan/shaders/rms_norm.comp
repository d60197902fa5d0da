#version 450
// out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * weight[i]: one workgroup of 64 threads
// per row; thread t sums x^2 over i = t, t + 64, ... in order, a tree adds the 64 sums.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) buffer Output { float out_values[]; };
layout(push_constant) uniform Params {
  uint width;
  float eps;
  uint x_word;
  uint weight_word;
  uint out_word;
} p;
shared float partial[64];

void main() {
  const uint r = gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  const uint xb = p.x_word + r * p.width;
  float sum = 0.0;
  for (uint i = t; i < p.width; i += 64u) sum += x[xb + i] * x[xb + i];
  partial[t] = sum;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    barrier();
  }
  const float scale = 1.0 / sqrt(partial[0] / float(p.width) + p.eps);
  const uint ob = p.out_word + r * p.width;
  for (uint i = t; i < p.width; i += 64u) {
    out_values[ob + i] = x[xb + i] * scale * weight[p.weight_word + i];
  }
}
