// The per-ISA kernel table. Each instruction set (scalar reference, AVX2, AVX-512) provides one
// KernelTable from its own translation unit; KernelsFor() picks the best one the CPU supports
// (the CPU backend asks once, at construction). Every fast entry has a scalar twin with the same
// contract, and tests compare them.
//
// Determinism contract (design.md, "batch invariance"): for every entry, each output element is
// computed in an order that depends only on its own inputs, never on how many rows (m) or which
// output range [n_begin, n_end) the call covers. So a token's result is bit-identical whether it is
// computed alone, in a batch, or in a different thread split.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "io/ggml_type.h"
#include "kv/kv_format.h"

namespace kvserve {

// One call of a matmul tile: y[i * ldy + j] = sum_k W[j][k] * X[i][k]
// for i in [0, m) and j in [n_begin, n_end).
// W rows are `w_row_bytes` apart, in the weight's stored type (F32, F16, BF16 or GGML blocks).
// X rows are `x_row_bytes` apart: float32 for F32/F16/BF16 weights, else blocks of the weight
// type's activation format (ActivationTypeFor). k is the row length in elements (a multiple of the
// weight type's block size).
struct TileScratch;  // scratch_buffer.h

struct MatmulTile {
  const uint8_t* w;
  size_t w_row_bytes;
  const uint8_t* x;
  size_t x_row_bytes;
  int m;
  int k;
  int n_begin;
  int n_end;
  float* y;
  int ldy;
  TileScratch* scratch;  // this thread's, for kernels that repack tiles
};

using MatmulTileFn = void (*)(const MatmulTile& tile);

// One query head attending over a sequence's keys and values in a paged K/V pool:
// out = softmax(scale * q · K[0..n_keys)ᵀ) · V[0..n_keys).
// Position p's K row (one head row of head_dim elements in `type`, laid out as kv_format.h says)
// is at k + slot(p) * slot_bytes, where slot(p) = block_table[p / block_size] * block_size +
// p % block_size; V likewise from v. Quantized rows (q8_0, q4_0) are dequantized exactly (scale *
// code) and their elements are then K_p[d] and V_p[d] below.
//
// Arithmetic (every table, bit for bit; attend_head.h has the details):
// - score_p: a 16-lane accumulator, lane l summing q[d] * K_p[d] for d = l, l + 16, ... in
//   increasing d with one FMA each (zero-padded to a multiple of 16), then HSum's halving tree
//   (lanes l + 8, then l + 4, l + 2, l + 1), then times scale;
// - e_p = KvExp(score_p - max score), a polynomial exp shared by all tables;
// - sum: 16 lanes, lane l adding e_p for p = l, l + 16, ... in order, then the halving tree;
// - out[d]: FMA chain over p in increasing order of (e_p * (1 / sum)) * V_p[d], from 0.
// A sliding window (first_key > 0) reads only the keys first_key .. n_keys - 1 (key j of the
// window is p = first_key + j, and j takes p's place above: scores[j], sum lane j mod 16). A
// soft-cap c > 0 replaces every score s by tanh(s * (1 / c)) * c (std::tanh, one key at a time:
// SoftCapScores of attend_head.h, called by every table) before the max. A learned sink s (a
// logit per head that joins the softmax's denominator and no value: gpt-oss) takes part in the
// max, max = fmax(max score, s), and adds KvExp(s - max) to the halving tree's sum; it is not
// soft-capped. With no sink (s = -infinity) both are the identity, so the bits are unchanged.
struct AttendJob {
  const float* q;  // [head_dim]
  const uint8_t* k;
  const uint8_t* v;
  size_t slot_bytes;
  KvType type;
  const int32_t* block_table;
  int block_size;
  int n_keys;
  int head_dim;  // at most kMaxAttendHeadDim
  float scale;
  float* scores;           // scratch, at least n_keys - first_key rounded up to 16 floats
  float* out;              // [head_dim]
  int first_key = 0;       // the window's first position; 0 = every key
  float soft_cap = 0.0f;   // attention logit soft-cap; 0 = none
  float sink = -INFINITY;  // a learned attention sink's logit (gpt-oss); -infinity = none
  // Added to each scaled score before the soft-cap (T5's relative position bias): bias[j] for
  // key first_key + j, [n_keys - first_key]; nullptr = none.
  const float* bias = nullptr;
};
constexpr int kMaxAttendHeadDim = 256;

// Activation rows up to which a decode tile's L2-prefetch form (decode_q4_0_x16_l2, ...) prefetches
// as it does for one row; more rows take the L1 form. Speculation's verify steps and a few streams
// read the weights as decode does (matmul.cc takes the form decode chose for them too).
constexpr int kPrefetchLevelRows = 4;

using AttendHeadFn = void (*)(const AttendJob& job);
// Query heads of one token: jobs that share block_table, block_size, slot_bytes, type, n_keys,
// first_key, head_dim and scale, each with its own q, k, v (its KV head's), scores, out, sink and
// bias (1 to kMaxAttendGroup of them). Every job's out is attend_head's, bit for bit. The AVX-512
// table walks the slots once for all of them, 16 keys at a time, and prefetches the next 16 keys'
// slots (the bytes its jobs' KV heads span) into L2; the others call attend_head on each job.
using AttendGroupFn = void (*)(std::span<const AttendJob> jobs);
constexpr size_t kMaxAttendGroup = 16;

// One row (token) of the gated delta rule (recurrent_ops.h) on state rows [j_begin, j_end) of one
// value head. For each state row j, in increasing j:
//   m = src[j] * decay (0 * decay where src is nullptr);  d = (v[j] - LaneDot(m, k)) * beta;
//   m += d * k;  state[j] = m;  out[j] = LaneDot(m, q) * scale
// where LaneDot(a, b) adds a[i] * b[i] into lane i % 16 in increasing i (from +0), then adds the
// lanes pairwise (l + 8, then + 4, + 2, + 1). Every product and sum is rounded on its own (no
// FMA), so every table gives the same bits. src may equal state; rows outside the range are not
// touched.
struct DeltaRuleStep {
  const float* src;  // [head_dim, head_dim], the state before this row; nullptr = zeros
  float* state;      // [head_dim, head_dim], the state after it
  const float* q;    // [head_dim], L2-normalized
  const float* k;    // [head_dim], L2-normalized
  const float* v;    // [head_dim]
  float* out;        // [head_dim]
  float decay;       // expf(g)
  float beta;
  float scale;  // 1 / sqrtf(head_dim)
  int head_dim;
  int j_begin;
  int j_end;
};
using DeltaRuleStepFn = void (*)(const DeltaRuleStep& step);

// A small product accumulated in place, for the chunked delta rule (delta_chunked.h, opt-in):
//   y[r][j] += Σ_{c < m} x[r][c] * b[c][j]   for r < n, j < w.
// Unlike the other entries the tables need not give the same bits (the AVX ones fuse the
// multiply-adds): each sum runs in increasing c, within 1 rounding of the plain one per term.
struct MatAcc {
  const float* x;  // [n, m], rows x_stride floats apart
  size_t x_stride;
  const float* b;  // [m, w], rows b_stride floats apart
  size_t b_stride;
  float* y;  // [n, w], rows y_stride floats apart
  size_t y_stride;
  int n, m, w;
};
using MatAccFn = void (*)(const MatAcc& p);

// Rows of the short causal convolution then SiLU (Backend::ShortConv) on `width` channels:
//   out[t][c] = silu(Σ_{j < kernel} weight[c * kernel + j] * window(t + j)[c]),
// summed from +0 in increasing j, each product rounded (no FMA); silu(s) = s / (1 + expf(-s)),
// expf the C library's. window(i) is hist row i for i < kernel - 1 (zeros where hist is nullptr),
// then x row i - (kernel - 1).
struct ConvRows {
  const float* hist;  // [kernel - 1] rows hist_stride floats apart, or nullptr
  size_t hist_stride;
  const float* x;  // [n_rows] rows x_stride floats apart
  size_t x_stride;
  const float* weight;  // [width, kernel]
  int kernel;
  int width;
  int n_rows;
  float* out;  // [n_rows] rows out_stride floats apart
  size_t out_stride;
};
using ConvRowsFn = void (*)(const ConvRows& rows);

struct KernelTable {
  const char* isa;  // "scalar", "avx2", "avxvnni", "avx512", "amx"
  MatmulTileFn matmul_f32;
  MatmulTileFn matmul_f16;
  MatmulTileFn matmul_bf16;
  MatmulTileFn matmul_q8_0;  // X quantized to Q8_0
  MatmulTileFn matmul_q4_0;  // X quantized to Q8_0
  // The same for matrices repacked at load (packed_weights.h): W is the packed matrix, w_row_bytes
  // the bytes of one 16-row group, n_begin a multiple of 16. nullptr: this table has none, and
  // matrices are not packed for it.
  MatmulTileFn matmul_q8_0_x16;
  MatmulTileFn matmul_q4_0_x16;
  MatmulTileFn matmul_q4_k_x16;  // packed_kquants.h; X in Q8_K
  MatmulTileFn matmul_q5_k_x16;
  MatmulTileFn matmul_q6_k_x16;
  MatmulTileFn matmul_q4_1_x16;  // packed_blocks32.h; X as for the stored layout
  MatmulTileFn matmul_q5_0_x16;
  MatmulTileFn matmul_q5_1_x16;
  MatmulTileFn matmul_iq4_nl_x16;
  MatmulTileFn matmul_mxfp4_x16;
  MatmulTileFn matmul_f32_x16;  // packed_floats.h; X in float32
  MatmulTileFn matmul_f16_x16;
  MatmulTileFn matmul_bf16_x16;
  // Other tiles for packed Q4_K, Q5_K and Q6_K matrices, for one activation row (decode): the bits
  // of the x16 tiles above, with memory read another way (AVX2: those read each super-block once
  // without software prefetch, these in two passes with it). Which is faster depends on the CPU,
  // so the CPU backend times both on the first decode steps and keeps the faster
  // (decode_tile_chooser.h). nullptr: none.
  MatmulTileFn decode_q4_k_x16_alt;
  MatmulTileFn decode_q5_k_x16_alt;
  MatmulTileFn decode_q6_k_x16_alt;
  // What the K-quants' two decode tiles are, for `kvserve bench`'s report: "one-pass" and
  // "two-pass" (AVX2 tables), "prefetch" and "no prefetch" (AVX-512). nullptr: "first", "alt".
  const char* kquant_decode_first_name;
  const char* kquant_decode_alt_name;
  // Other decode tiles (one activation row) of the float matrices (stored layout) and of the packed
  // 32-element block types: the bits of matmul_f32 .. matmul_mxfp4_x16, with their software
  // prefetches into L2, twice as far ahead, instead of into L1 (prefetch_ahead.h). Timed against
  // those by the same chooser. nullptr: none.
  MatmulTileFn decode_f32_l2;
  MatmulTileFn decode_f16_l2;
  MatmulTileFn decode_bf16_l2;
  MatmulTileFn decode_q8_0_x16_l2;
  MatmulTileFn decode_q4_0_x16_l2;
  MatmulTileFn decode_q4_1_x16_l2;
  MatmulTileFn decode_q5_0_x16_l2;
  MatmulTileFn decode_q5_1_x16_l2;
  MatmulTileFn decode_iq4_nl_x16_l2;
  MatmulTileFn decode_mxfp4_x16_l2;
  // The float x16 tiles' decode tile reads its stream without software prefetch; these prefetch it
  // into L2 as well. Same bits.
  MatmulTileFn decode_f32_x16_l2;
  MatmulTileFn decode_f16_x16_l2;
  MatmulTileFn decode_bf16_x16_l2;
  // The other GGML weight types in their stored layout, X in ActivationTypeFor's format. Q2_K ..
  // Q6_K have SIMD tiles on the AVX2 and AVX-512 tables (kquant_tiles_*.cc; Q4_K .. Q6_K run
  // them only when a matrix is not packed, e.g. KVSERVE_PACK=0); Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4
  // keep the scalar tiles of quant_tiles_scalar.h on every table, since their matrices are packed
  // at load and run the x16 tiles above. Every tile gives the scalar tile's bits.
  MatmulTileFn matmul_q4_1;
  MatmulTileFn matmul_q5_0;
  MatmulTileFn matmul_q5_1;
  MatmulTileFn matmul_iq4_nl;
  MatmulTileFn matmul_mxfp4;
  MatmulTileFn matmul_q2_k;
  MatmulTileFn matmul_q3_k;
  MatmulTileFn matmul_q4_k;
  MatmulTileFn matmul_q5_k;
  MatmulTileFn matmul_q6_k;
  // Quantizes a float row of length k (multiple of 32) to Q8_0 blocks, for the activations.
  void (*quantize_row_q8_0)(const float* x, int k, BlockQ8_0* out);
  // Quantizes a float row of length k (multiple of 32) to Q8_1 blocks (Q4_1's and Q5_1's
  // activations): the bits of ggml_encode::Q8_1 (kernels/quantize_ggml.h) on every table.
  void (*quantize_row_q8_1)(const float* x, int k, BlockQ8_1* out);
  // Quantizes a float row of length k (multiple of 256) to Q8_K blocks (the K-quants'
  // activations): the bits of ggml_encode::Q8_K (kernels/quantize_ggml.h) on every table.
  void (*quantize_row_q8_k)(const float* x, int k, BlockQ8_K* out);
  // Dot product of two float vectors of length n.
  float (*dot_f32)(const float* a, const float* b, int n);
  AttendHeadFn attend_head;
  AttendGroupFn attend_group;
  // x[i] = f16 table lookup of GELU (ops.h GeluInPlace): x <= -10 gives 0, x >= 10 (and NaN)
  // passes through, otherwise table[f16(x)] (round to nearest even) widened to float. `table` has
  // 65536 entries plus one of padding (vector gathers read 4 bytes).
  void (*gelu_f16_table)(const uint16_t* table, float* x, int n);
  // SwiGLU in place: gate[i] = gate[i] / (1 + KvExp(-gate[i])) * up[i], in exactly that order of
  // IEEE operations (KvExp: attend_head.h), so every table gives the same bits.  [n]
  void (*swiglu)(float* gate, const float* up, int n);
  // The recurrent layers' hot loops (recurrent_ops.h): the same bits on every table.
  DeltaRuleStepFn delta_rule_step;
  ConvRowsFn conv_rows;
  MatAccFn mat_acc;  // within rounding, not the same bits: see MatAcc
};

const KernelTable& ScalarKernels();
// nullptr when this build did not compile the ISA.
const KernelTable* Avx2Kernels();
// The AVX2 table with the quantized matmuls on AVX-VNNI (vpdpbusd on 256 bits), for CPUs that have
// AVX-VNNI but not AVX-512 (Intel Core since Alder Lake). Same bits as the AVX2 table.
const KernelTable* AvxVnniKernels();
const KernelTable* Avx512Kernels();
// The AVX-512 table with the packed Q8_0 and Q4_0 prompt matmuls on AMX-INT8 tiles (Intel Xeon
// since Sapphire Rapids). Same bits as the AVX-512 table.
const KernelTable* AmxKernels();

// The best table this CPU supports at or below `isa` ("" = no limit;
// scalar|avx2|avxvnni|avx512|amx): amx, then avx512, then avxvnni, then avx2, then scalar. Pure:
// the caller decides where `isa` comes from (the command line reads KVSERVE_ISA once at start-up).
const KernelTable& KernelsFor(std::string_view isa);
bool CpuSupportsAvx2();
bool CpuSupportsAvxVnni();
bool CpuSupportsAvx512();
// AVX-512 (as above), AMX-TILE and AMX-INT8 with their state enabled by the OS, and the process
// granted the tile data state (asked once).
bool CpuSupportsAmx();

// The format a weight type's tiles take their activations in, as GGML's CPU backend quantizes
// them: F32 for F32/F16/BF16 weights, Q8_0 for Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1,
// Q8_K for Q2_K..Q6_K.
GgmlType ActivationTypeFor(GgmlType weight);
// Picks the tile function for a weight type; nullptr if the type has no kernel.
MatmulTileFn MatmulFor(const KernelTable& table, GgmlType type);
// The same for a matrix in the packed x16 layout; nullptr if the table has no such kernel.
MatmulTileFn PackedMatmulFor(const KernelTable& table, GgmlType type);
// The table's other decode tile for `type` (decode_q4_k_x16_alt, decode_f16_l2, ...): an
// alternative to PackedMatmulFor's tile where `packed`, else to MatmulFor's (F32, F16 and BF16
// only: the quantized types' alternatives are for their packed layouts, whatever `packed` says);
// nullptr where the table has none.
MatmulTileFn DecodeAlternativeFor(const KernelTable& table, GgmlType type, bool packed);

}  // namespace kvserve
