#version 450
// Row moves, as the CPU backend's memcpy (32-bit words copied as bits): one thread per element
// i < n_rows * width of row r = i / width: dst row d(r) = src row s(r), where mode 0 (CopyRows)
// has s = d = r, mode 1 (GatherRows) s = rows[r], d = r, and mode 2 (ScatterRows) s = r,
// d = rows[r]. Rows are src_stride and dst_stride words apart.
// Groups: (groups_x, ceil(n / (256 * groups_x))).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Dst { uint dst[]; };
layout(std430, binding = 2) readonly buffer Rows { int rows[]; };
layout(push_constant) uniform Params {
  uint n;
  uint width;
  uint src_stride;
  uint dst_stride;
  uint src_word;
  uint dst_word;
  uint rows_word;
  uint mode;
  uint groups_x;
} p;

void main() {
  const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  const uint r = i / p.width;
  const uint c = i % p.width;
  const uint s = p.mode == 1u ? uint(rows[p.rows_word + r]) : r;
  const uint d = p.mode == 2u ? uint(rows[p.rows_word + r]) : r;
  dst[p.dst_word + d * p.dst_stride + c] = src[p.src_word + s * p.src_stride + c];
}
