#version 450
// x[i][c] += sum_j weights[i * k + j] * src[i * k + j][c], the k products summed in j order from 0
// and then added, as the CPU backend does (kernels/cpu/moe_ops.cc AddWeightedSum), without
// contraction into fma: its bits. One thread per (i, c); groups (groups_x, ceil(n / (256 *
// groups_x))) over n = n_rows * width.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Src { float src[]; };
layout(std430, binding = 2) readonly buffer Weights { float weights[]; };
layout(push_constant) uniform Params {
  uint n_rows;
  uint k;
  uint width;
  uint x_word;
  uint src_word;
  uint weights_word;
  uint groups_x;
} p;

void main() {
  const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (id >= p.n_rows * p.width) return;
  const uint i = id / p.width;
  const uint c = id % p.width;
  const uint w = p.weights_word + i * p.k;
  const uint s = p.src_word + i * p.k * p.width + c;
  precise float acc = weights[w] * src[s];
  for (uint j = 1u; j < p.k; ++j) {
    precise float product = weights[w + j] * src[s + j * p.width];
    acc = acc + product;
  }
  precise float sum = x[p.x_word + id] + acc;
  x[p.x_word + id] = sum;
}
