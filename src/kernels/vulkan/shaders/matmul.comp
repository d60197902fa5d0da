// variants: matmul_f32 TYPE_F32, matmul_f16 TYPE_F16, matmul_bf16 TYPE_BF16, matmul_q8_0 TYPE_Q8_0, matmul_q4_0 TYPE_Q4_0, matmul_q4_k TYPE_Q4_K, matmul_q5_k TYPE_Q5_K, matmul_q6_k TYPE_Q6_K, matmul_q4_1 TYPE_Q4_1, matmul_q5_0 TYPE_Q5_0, matmul_q5_1 TYPE_Q5_1, matmul_iq4_nl TYPE_IQ4_NL, matmul_mxfp4 TYPE_MXFP4, matmul_q2_k TYPE_Q2_K, matmul_q3_k TYPE_Q3_K
#version 450
// y[r, o] = sum_i W[o, i] * x[r, i] for every row r of x and output o, W in its GGML layout.
// For the quantized types x comes rounded to 8 bits by the host, as the CPU backend and
// llama.cpp's CPU round it (Q8_0 for Q8_0, Q4_0, Q5_0, IQ4_NL and MXFP4; Q8_1 for Q4_1 and Q5_1;
// Q8_K for the K-quants; byte rows of x_row_bytes), and each 32-element unit is an integer dot
// times the blocks' scales, as theirs are: the results then differ from the CPU's by float
// summation order alone.
// One workgroup of 64 threads per (o, r): thread t sums the 32-element units t, t + 64, ... of
// the row in order, then a tree in shared memory adds the 64 partial sums. The order depends on
// n_in alone, never on the batch, so a token's outputs are the same bits whatever the batch.
// Groups: (groups_x, ceil(n_out / groups_x), n_rows); o = group.y * groups_x + group.x.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
layout(std430, binding = 1) readonly buffer Input { float x[]; };
#else
#define QUANTIZED_INPUT 1
layout(std430, binding = 1) readonly buffer Input { uint xq[]; };
#endif
layout(std430, binding = 2) buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint n_out;
  uint n_in;
  uint row_bytes;
  uint w_byte;       // the matrix's first byte in `w`
  uint x_start;      // x's first float (f32 input) or byte (quantized input)
  uint y_word;
  uint groups_x;
  uint x_row_bytes;  // quantized input: bytes per row of x
} p;
shared float partial[64];

uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint u16_at(uint b) { return byte_at(b) | (byte_at(b + 1u) << 8); }
float f16_at(uint b) { return unpackHalf2x16(u16_at(b)).x; }
int i8_at(uint b) { return int(byte_at(b) << 24) >> 24; }
uint u32_at(uint b) { return u16_at(b) | (u16_at(b + 2u) << 16); }

#if defined(QUANTIZED_INPUT)
uint x_byte(uint b) { return (xq[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
int x_i8(uint b) { return int(x_byte(b) << 24) >> 24; }
float x_f16(uint b) { return unpackHalf2x16(x_byte(b) | (x_byte(b + 1u) << 8)).x; }
float x_f32(uint b) { return uintBitsToFloat(xq[b >> 2]); }  // b a multiple of 4
#endif

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
float weight(uint row, uint i) {
#if defined(TYPE_F32)
  return uintBitsToFloat(w[(row >> 2) + i]);
#elif defined(TYPE_F16)
  return f16_at(row + 2u * i);
#else
  return uintBitsToFloat(u16_at(row + 2u * i) << 16);
#endif
}

// Elements 32u .. 32u + 31 (fewer at the row's end) of the row starting at byte `row`.
float unit_dot(uint row, uint u, uint xb) {
  float sum = 0.0;
  const uint end = min(32u * u + 32u, p.n_in);
  for (uint i = 32u * u; i < end; ++i) sum += weight(row, i) * x[xb + i];
  return sum;
}
#elif defined(TYPE_Q8_0)
// Block u of W (f16 d, 32 int8) against block u of x in Q8_0 (f16 d, 32 int8).
float unit_dot(uint row, uint u, uint xb) {
  const uint b = row + 34u * u;
  const uint xu = xb + 34u * u;
  int sum = 0;
  for (uint j = 0u; j < 32u; ++j) sum += i8_at(b + 2u + j) * x_i8(xu + 2u + j);
  return float(sum) * (f16_at(b) * x_f16(xu));
}
#elif defined(TYPE_Q4_0)
// Block u of W (f16 d, 16 bytes of two nibbles, q - 8) against block u of x in Q8_0.
float unit_dot(uint row, uint u, uint xb) {
  const uint b = row + 18u * u;
  const uint xu = xb + 34u * u;
  int sum = 0;
  for (uint j = 0u; j < 16u; ++j) {
    const uint q = byte_at(b + 2u + j);
    sum += (int(q & 15u) - 8) * x_i8(xu + 2u + j) + (int(q >> 4) - 8) * x_i8(xu + 18u + j);
  }
  return float(sum) * (f16_at(b) * x_f16(xu));
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Sub-block j (0..7) of a super-block's 6-bit scale and min, packed in 12 bytes at `s`.
void scale_min(uint s, uint j, out int scale, out int min_value) {
  if (j < 4u) {
    scale = int(byte_at(s + j) & 63u);
    min_value = int(byte_at(s + j + 4u) & 63u);
  } else {
    scale = int((byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4));
    min_value = int((byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4));
  }
}

// Super-block u / 8 (Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes; Q5_K adds 32 bytes
// of fifth bits before the nibbles), sub-block j = u % 8: 32 elements of the nibbles
// qs[32 * (j / 2) + l], low nibbles for even j, plus bit j of qh[l] * 16 (Q5_K); against x's
// Q8_K super-block (f32 d, 256 int8, 16 int16 sums).
float unit_dot(uint row, uint u, uint xb) {
#if defined(TYPE_Q4_K)
  const uint b = row + 144u * (u >> 3);
  const uint qs = b + 16u;
#else
  const uint b = row + 176u * (u >> 3);
  const uint qh = b + 16u;
  const uint qs = b + 48u;
#endif
  const uint j = u & 7u;
  const uint shift = (j & 1u) * 4u;
  const uint xs = xb + 292u * (u >> 3);
  const uint xu = xs + 4u + 32u * j;
  int sum = 0;
  int sum_x = 0;
  for (uint l = 0u; l < 32u; ++l) {
    uint q = (byte_at(qs + 32u * (j >> 1) + l) >> shift) & 15u;
#if defined(TYPE_Q5_K)
    q += ((byte_at(qh + l) >> j) & 1u) << 4;
#endif
    const int xq_l = x_i8(xu + l);
    sum += int(q) * xq_l;
    sum_x += xq_l;
  }
  int scale;
  int min_value;
  scale_min(b + 4u, j, scale, min_value);
  const float dx = x_f32(xs);
  return (f16_at(b) * dx) * float(scale * sum) - (f16_at(b + 2u) * dx) * float(min_value * sum_x);
}
#elif defined(TYPE_Q6_K)
// Super-block u / 8: ql[128], qh[64], int8 scales[16], f16 d. Sub-block j = u % 8 is half n = j / 4,
// quarter k = j % 4: element l takes ql[64n + 32(k & 1) + l]'s low (k < 2) or high nibble, bits
// 2k, 2k + 1 of qh[32n + l] above it, minus 32, times scale 8n + l / 16 + 2k; against x's Q8_K
// super-block.
float unit_dot(uint row, uint u, uint xb) {
  const uint b = row + 210u * (u >> 3);
  const uint j = u & 7u;
  const uint n = j >> 2;
  const uint k = j & 3u;
  const uint ql = b + 64u * n + 32u * (k & 1u);
  const uint qh = b + 128u + 32u * n;
  const uint nibble_shift = (k >> 1) * 4u;
  const uint xs = xb + 292u * (u >> 3);
  const uint xu = xs + 4u + 32u * j;
  int halves[2] = int[2](0, 0);
  for (uint l = 0u; l < 32u; ++l) {
    const uint low = (byte_at(ql + l) >> nibble_shift) & 15u;
    const uint high = (byte_at(qh + l) >> (2u * k)) & 3u;
    halves[l >> 4] += (int(low | (high << 4)) - 32) * x_i8(xu + l);
  }
  const uint scales = b + 192u + 8u * n + 2u * k;
  const int total = i8_at(scales) * halves[0] + i8_at(scales + 1u) * halves[1];
  return (f16_at(b + 208u) * x_f32(xs)) * float(total);
}
#elif defined(TYPE_Q5_0) || defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
#if defined(TYPE_IQ4_NL)
const int kValues[16] =
    int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#elif defined(TYPE_MXFP4)
const int kValues[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
#endif
// Block u of W against block u of x in Q8_0. Q5_0: f16 d, 4 bytes qh, 16 nibble bytes (as Q4_0);
// element j's fifth bit is bit j of qh, minus 16. IQ4_NL: f16 d, 16 nibble bytes, the nibble
// indexing kValues. MXFP4: an E8M0 byte e, 16 nibble bytes indexing the doubled E2M1 values,
// d = 2^(e - 128) built from its bits as the CPU's E8M0Half (io/ggml_type.h).
float unit_dot(uint row, uint u, uint xb) {
#if defined(TYPE_Q5_0)
  const uint b = row + 22u * u;
  const uint qs = b + 6u;
  const uint qh = u32_at(b + 2u);
  const float d = f16_at(b);
#elif defined(TYPE_IQ4_NL)
  const uint b = row + 18u * u;
  const uint qs = b + 2u;
  const float d = f16_at(b);
#else
  const uint b = row + 17u * u;
  const uint qs = b + 1u;
  const uint e = byte_at(b);
  const float d = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
#endif
  const uint xu = xb + 34u * u;
  int sum = 0;
  for (uint j = 0u; j < 16u; ++j) {
    const uint q = byte_at(qs + j);
#if defined(TYPE_Q5_0)
    const int low = int((q & 15u) | (((qh >> j) & 1u) << 4)) - 16;
    const int high = int((q >> 4) | (((qh >> (j + 16u)) & 1u) << 4)) - 16;
#else
    const int low = kValues[q & 15u];
    const int high = kValues[q >> 4];
#endif
    sum += low * x_i8(xu + 2u + j) + high * x_i8(xu + 18u + j);
  }
  return float(sum) * (d * x_f16(xu));
}
#elif defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
// Block u of W (f16 d, f16 m, Q5_1: 4 bytes qh, 16 nibble bytes; q = nibble (+ 16 * bit j of qh))
// against block u of x in Q8_1 (f16 d, f16 s = d * sum of its int8s, 32 int8): the offset m meets
// x's s, as the CPU's isum * (d_w * d_x) + m_w * s_x, not contracted into an fma.
float unit_dot(uint row, uint u, uint xb) {
#if defined(TYPE_Q4_1)
  const uint b = row + 20u * u;
  const uint qs = b + 4u;
#else
  const uint b = row + 24u * u;
  const uint qh = u32_at(b + 4u);
  const uint qs = b + 8u;
#endif
  const uint xu = xb + 36u * u;
  int sum = 0;
  for (uint j = 0u; j < 16u; ++j) {
    const uint q = byte_at(qs + j);
    uint low = q & 15u;
    uint high = q >> 4;
#if defined(TYPE_Q5_1)
    low |= ((qh >> j) & 1u) << 4;
    high |= ((qh >> (j + 16u)) & 1u) << 4;
#endif
    sum += int(low) * x_i8(xu + 4u + j) + int(high) * x_i8(xu + 20u + j);
  }
  precise float scaled = float(sum) * (f16_at(b) * x_f16(xu));
  precise float offset = f16_at(b + 2u) * x_f16(xu + 2u);
  precise float dot = scaled + offset;
  return dot;
}
#elif defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
// Super-block u / 8 in sub-blocks of 16, unit j = u % 8 is sub-blocks 2j and 2j + 1: element l
// (0..31) takes bits 2(j % 4), 2(j % 4) + 1 of quants[32(j / 4) + l]. Q2_K (16 scale bytes: scale
// in the low nibble, min in the high; 64 quant bytes; f16 d, f16 dmin): d * scale * q -
// dmin * min. Q3_K (32 bytes hmask, 64 quant bytes, 12 bytes of 6-bit scales stored + 32, f16 d):
// q - 4 unless bit j of hmask[l] is set, times d * scale. Against x's Q8_K super-block.
float unit_dot(uint row, uint u, uint xb) {
#if defined(TYPE_Q2_K)
  const uint b = row + 84u * (u >> 3);
  const uint qs = b + 16u;
#else
  const uint b = row + 110u * (u >> 3);
  const uint qs = b + 32u;
#endif
  const uint j = u & 7u;
  const uint xs = xb + 292u * (u >> 3);
  const uint xu = xs + 4u + 32u * j;
  int halves[2] = int[2](0, 0);
  int sums_x[2] = int[2](0, 0);
  for (uint l = 0u; l < 32u; ++l) {
    int q = int((byte_at(qs + 32u * (j >> 2) + l) >> (2u * (j & 3u))) & 3u);
#if defined(TYPE_Q3_K)
    if (((byte_at(b + l) >> j) & 1u) == 0u) q -= 4;
#endif
    const int xq_l = x_i8(xu + l);
    halves[l >> 4] += q * xq_l;
    sums_x[l >> 4] += xq_l;
  }
  const float dx = x_f32(xs);
#if defined(TYPE_Q2_K)
  const uint s0 = byte_at(b + 2u * j);
  const uint s1 = byte_at(b + 2u * j + 1u);
  const int total = int(s0 & 15u) * halves[0] + int(s1 & 15u) * halves[1];
  const int mins = int(s0 >> 4) * sums_x[0] + int(s1 >> 4) * sums_x[1];
  return (f16_at(b + 80u) * dx) * float(total) - (f16_at(b + 82u) * dx) * float(mins);
#else
  int total = 0;
  for (uint h = 0u; h < 2u; ++h) {
    const uint s = 2u * j + h;
    const uint low = s < 8u ? byte_at(b + 96u + s) & 15u : byte_at(b + 88u + s) >> 4;
    const uint high = (byte_at(b + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
    total += (int(low | (high << 4)) - 32) * halves[h];
  }
  return (f16_at(b + 108u) * dx) * float(total);
#endif
}
#endif

void main() {
  const uint o = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
  const uint r = gl_WorkGroupID.z;
  const uint t = gl_LocalInvocationID.x;
  if (o >= p.n_out) return;  // the whole group leaves: no barrier is skipped by part of it
  const uint row = p.w_byte + o * p.row_bytes;
#if defined(QUANTIZED_INPUT)
  const uint xb = p.x_start + r * p.x_row_bytes;
#else
  const uint xb = p.x_start + r * p.n_in;
#endif
  const uint units = (p.n_in + 31u) / 32u;
  float sum = 0.0;
  for (uint u = t; u < units; u += 64u) sum += unit_dot(row, u, xb);
  partial[t] = sum;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    barrier();
  }
  if (t == 0u) y[p.y_word + r * p.n_out + o] = partial[0];
}
