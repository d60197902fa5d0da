// The recurrent layers' operations (Backend::ShortConv, GatedDeltaNet, DeltaNetGates,
// SigmoidGate, SigmoidScaleRows) on the CPU. The hot loops (one token of the delta rule on a
// block of state rows, the convolution's taps and SiLU) are kernel-table entries (kernels.h:
// delta_rule_step, conv_rows): plain C++ here for the scalar table (no intrinsics, no FMA: the
// file is compiled for the baseline ISA), AVX2 and AVX-512 in recurrent_rows_*.cc, all giving the
// same bits. The rest is plain C++ that every table shares. Sums run in an order fixed by the row
// alone: a row's result never depends on the batch or the thread split. The exception is the
// opt-in chunked form (DeltaNetArgs::chunk, delta_chunked.h): its products go through
// kernels.mat_acc, whose tables agree within rounding only.
//
// Threads: ShortConvRuns splits channels, GatedDeltaNetRuns splits (value head, state rows); each
// task walks the runs in list order, so a sequence's chained runs (RecurrentRun) stay in order.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/backend.h"
#include "kernels/cpu/kernels.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace kvserve {

// Backend::ShortConv's operands.
struct ShortConvArgs {
  const float* x = nullptr;  // rows x_stride floats apart
  size_t x_stride = 0;
  int channels = 0;
  const float* weight = nullptr;  // [channels, kernel]
  int kernel = 0;
  float* out = nullptr;  // [n_rows, channels]
};
// Backend::ShortConv on `pool`, in channel chunks, through kernels.conv_rows.
void ShortConvRuns(const ShortConvArgs& args, std::span<const RecurrentRun> runs,
                   const KernelTable& kernels, ThreadPool& pool);

// Backend::GatedDeltaNet's operands.
struct DeltaNetArgs {
  const float* qkv = nullptr;  // rows qkv_stride floats apart: q, k [n_k_heads * head_dim], v
  size_t qkv_stride = 0;
  const float* g = nullptr;     // [n_rows, n_v_heads], log of the decay
  const float* beta = nullptr;  // [n_rows, n_v_heads]
  int n_k_heads = 0;
  int n_v_heads = 0;
  int head_dim = 0;
  float eps = 0;         // of the L2 norms
  float* out = nullptr;  // [n_rows, n_v_heads * head_dim]
  // 0: token by token. Else runs of at least `chunk` rows take the chunked form (delta_chunked.h;
  // equal within rounding only, bits depending on the chunks' starts), the others token by token.
  int chunk = 0;
};
// Backend::GatedDeltaNet on `pool`: first the L2-normalized q and k of every row into `scratch`
// (grown to [n_rows, 2, n_k_heads, head_dim]; n_rows = the largest row_end), then the delta rule
// per (value head, block of state rows) through kernels.delta_rule_step; with args.chunk set and a
// run that long, per value head instead (DeltaRuleChunkedRun for the long runs).
void GatedDeltaNetRuns(const DeltaNetArgs& args, std::span<const RecurrentRun> runs,
                       const KernelTable& kernels, AlignedFloats& scratch, ThreadPool& pool);

// The sum of a[i] * b[i] in the order the recurrent ops use: element i goes to lane i % 16 (in
// increasing i), then the lanes are added pairwise (l + 8, then + 4, + 2, + 1).  [n]
float LaneDot(const float* a, const float* b, int n);

// out = x * (1 / max(sqrtf(Σ x²), eps)), Σ of the float squares in double (ggml_l2_norm).  [n]
void L2Normalize(const float* x, int n, float eps, float* out);

// One row of Backend::DeltaNetGates.  alpha, beta_in, dt_bias, a, g, beta: [n_heads]
void DeltaNetGatesRow(const float* alpha, const float* beta_in, const float* dt_bias,
                      const float* a, int n_heads, float* g, float* beta);

// x[i] *= 1 / (1 + expf(-gate[i])).  [n]
void SigmoidGateRow(float* x, const float* gate, int n);

// x[i] *= 1 / (1 + expf(-gate)), the factor computed once.  [n]
void SigmoidScaleRow(float* x, float gate, int n);

}  // namespace kvserve
