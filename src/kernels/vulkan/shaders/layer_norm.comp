#version 450
// out[r, i] = (x[r, i] - mean) / sqrt(var + eps) * weight[i] + bias[i], as the CPU backend
// computes it (kernels/cpu/ops.cc LayerNorm: the variance of the centered floats): one workgroup
// of 64 threads per row; thread t sums over i = t, t + 64, ... in order, a tree adds the 64 sums.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) buffer Output { float out_values[]; };
layout(push_constant) uniform Params {
  uint width;
  float eps;
  uint x_word;
  uint weight_word;
  uint bias_word;
  uint out_word;
} p;
shared float partial[64];

// The sum of the 64 threads' values, the same order whatever the row.
float tree_sum(float value) {
  const uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    barrier();
  }
  const float total = partial[0];
  barrier();  // partial is reused by the next sum
  return total;
}

void main() {
  const uint r = gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  const uint xb = p.x_word + r * p.width;
  float sum = 0.0;
  for (uint i = t; i < p.width; i += 64u) sum += x[xb + i];
  const float mean = tree_sum(sum) / float(p.width);
  float sum_sq = 0.0;
  for (uint i = t; i < p.width; i += 64u) {
    precise float centered = x[xb + i] - mean;
    sum_sq += centered * centered;
  }
  const float scale = 1.0 / sqrt(tree_sum(sum_sq) / float(p.width) + p.eps);
  const uint ob = p.out_word + r * p.width;
  for (uint i = t; i < p.width; i += 64u) {
    precise float centered = x[xb + i] - mean;
    precise float scaled = centered * scale * weight[p.weight_word + i];
    out_values[ob + i] = scaled + bias[p.bias_word + i];
  }
}
