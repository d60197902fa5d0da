#include "kernels/cpu/recurrent_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/delta_chunked.h"
#include "kernels/cpu/recurrent_rows.h"

namespace kvserve {

namespace {

// Channels per ShortConv task, and state rows (value indices) per GatedDeltaNet task. Neither
// changes a bit of the results: each channel and each state row is computed alone.
constexpr int kConvChunk = kMaxConvWidth;
constexpr int kStateRows = 16;
constexpr int kLanes = 16;  // LaneDot's accumulators

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// ggml_softplus: x past 20 passes through.
float Softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

int MaxRowEnd(std::span<const RecurrentRun> runs) {
  int n_rows = 0;
  for (const RecurrentRun& run : runs) n_rows = std::max(n_rows, run.row_end);
  return n_rows;
}

// One run of ShortConv on channels [c_begin, c_end) (at most kMaxConvWidth): the outputs first,
// all read from `from` and x, then the new state, row i from x' row n + i in increasing i (x' =
// the kernel - 1 state rows, then the run's rows of x), so from == to reads each old row before it
// is overwritten.
void ShortConvChunk(const ShortConvArgs& a, const KernelTable& kernels, const RecurrentRun& run,
                    int c_begin, int c_end) {
  const int hist = a.kernel - 1;
  const int n = run.row_end - run.row_begin;
  const int width = c_end - c_begin;
  const float* x = a.x + static_cast<size_t>(run.row_begin) * a.x_stride + c_begin;
  const float* from = run.from != nullptr ? run.from + c_begin : nullptr;
  if (n > 0) {
    kernels.conv_rows({.hist = from,
                       .hist_stride = static_cast<size_t>(a.channels),
                       .x = x,
                       .x_stride = a.x_stride,
                       .weight = a.weight + static_cast<size_t>(c_begin) * a.kernel,
                       .kernel = a.kernel,
                       .width = width,
                       .n_rows = n,
                       .out = a.out + static_cast<size_t>(run.row_begin) * a.channels + c_begin,
                       .out_stride = static_cast<size_t>(a.channels)});
  }
  for (int i = 0; i < hist; ++i) {
    float* dst = run.to + static_cast<size_t>(i) * a.channels + c_begin;
    const int w = n + i;  // row w of x'
    if (w >= hist) {
      const float* src = x + static_cast<size_t>(w - hist) * a.x_stride;
      std::copy(src, src + width, dst);
    } else if (from == nullptr) {
      std::fill(dst, dst + width, 0.0f);
    } else {
      const float* src = from + static_cast<size_t>(w) * a.channels;
      if (src != dst) std::copy(src, src + width, dst);
    }
  }
}

// Phase 1 of GatedDeltaNetRuns: unit (row r, key head kh) writes the normalized q and k of that
// head to qk[r][0][kh] and qk[r][1][kh].
void NormalizeQk(const DeltaNetArgs& a, int64_t unit, float* qk) {
  const int r = static_cast<int>(unit / a.n_k_heads);
  const int kh = static_cast<int>(unit % a.n_k_heads);
  const size_t width = static_cast<size_t>(a.n_k_heads) * a.head_dim;
  const float* q = a.qkv + r * a.qkv_stride + static_cast<size_t>(kh) * a.head_dim;
  float* q_out = qk + 2 * width * r + static_cast<size_t>(kh) * a.head_dim;
  L2Normalize(q, a.head_dim, a.eps, q_out);
  L2Normalize(q + width, a.head_dim, a.eps, q_out + width);
}

// Phase 2: the delta rule of value head h on state rows [j_begin, j_end), every row of one run.
// Each state row evolves alone (its own decay, dots and update), so a split by rows changes no
// bit. The run's first row reads `from` (or zeros) and writes `to`; the later rows work in place.
void DeltaRuleRun(const DeltaNetArgs& a, const KernelTable& kernels, const float* qk,
                  const RecurrentRun& run, int h, int j_begin, int j_end) {
  const int hd = a.head_dim;
  const size_t head_floats = static_cast<size_t>(hd) * hd;
  const size_t k_width = static_cast<size_t>(a.n_k_heads) * hd;
  const int kh = h % a.n_k_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* from = run.from != nullptr ? run.from + h * head_floats : nullptr;
  float* state = run.to + h * head_floats;
  if (run.row_begin == run.row_end && from != state) {
    for (int j = j_begin; j < j_end; ++j) {
      float* row = state + static_cast<size_t>(j) * hd;
      if (from != nullptr) {
        std::copy(from + static_cast<size_t>(j) * hd, from + static_cast<size_t>(j + 1) * hd, row);
      } else {
        std::fill(row, row + hd, 0.0f);
      }
    }
    return;
  }
  for (int r = run.row_begin; r < run.row_end; ++r) {
    const float* q = qk + 2 * k_width * r + static_cast<size_t>(kh) * hd;
    kernels.delta_rule_step(
        {.src = r == run.row_begin ? from : state,
         .state = state,
         .q = q,
         .k = q + k_width,
         .v = a.qkv + r * a.qkv_stride + 2 * k_width + static_cast<size_t>(h) * hd,
         .out = a.out + (static_cast<size_t>(r) * a.n_v_heads + h) * hd,
         .decay = std::exp(a.g[static_cast<size_t>(r) * a.n_v_heads + h]),
         .beta = a.beta[static_cast<size_t>(r) * a.n_v_heads + h],
         .scale = scale,
         .head_dim = hd,
         .j_begin = j_begin,
         .j_end = j_end});
  }
}

bool HasChunkedRun(const DeltaNetArgs& a, std::span<const RecurrentRun> runs) {
  if (a.chunk <= 0) return false;
  for (const RecurrentRun& run : runs) {
    if (run.row_end - run.row_begin >= a.chunk) return true;
  }
  return false;
}

// Phase 2 with the chunked form on: units are value heads (a head's chunk matrices are shared by
// all its state rows), each run of at least a.chunk rows chunked, the others token by token.
void DeltaRuleHeads(const DeltaNetArgs& a, std::span<const RecurrentRun> runs,
                    const KernelTable& kernels, const float* qk, ThreadPool& pool) {
  const int hd = a.head_dim;
  const int64_t cost = static_cast<int64_t>(MaxRowEnd(runs)) * a.n_v_heads * hd * hd * 6;
  pool.ParallelFor(
      a.n_v_heads,
      [&](int64_t begin, int64_t end) {
        DeltaChunkScratch scratch;
        for (const RecurrentRun& run : runs) {
          const bool chunked = run.row_end - run.row_begin >= a.chunk;
          for (int h = static_cast<int>(begin); h < static_cast<int>(end); ++h) {
            if (chunked) {
              DeltaRuleChunkedRun(a, kernels, qk, run, h, a.chunk, scratch);
            } else {
              DeltaRuleRun(a, kernels, qk, run, h, 0, hd);
            }
          }
        }
      },
      cost);
}

}  // namespace

float LaneDot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  for (int half = kLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
  }
  return acc[0];
}

void L2Normalize(const float* x, int n, float eps, float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
}

void ShortConvRuns(const ShortConvArgs& args, std::span<const RecurrentRun> runs,
                   const KernelTable& kernels, ThreadPool& pool) {
  const int64_t n_chunks = (args.channels + kConvChunk - 1) / kConvChunk;
  const int64_t cost = static_cast<int64_t>(MaxRowEnd(runs)) * args.channels * args.kernel * 2;
  pool.ParallelFor(
      n_chunks,
      [&](int64_t begin, int64_t end) {
        for (const RecurrentRun& run : runs) {
          for (int64_t chunk = begin; chunk < end; ++chunk) {
            const int c_begin = static_cast<int>(chunk) * kConvChunk;
            const int c_end = std::min(args.channels, c_begin + kConvChunk);
            ShortConvChunk(args, kernels, run, c_begin, c_end);
          }
        }
      },
      cost);
}

void GatedDeltaNetRuns(const DeltaNetArgs& args, std::span<const RecurrentRun> runs,
                       const KernelTable& kernels, AlignedFloats& scratch, ThreadPool& pool) {
  const int n_rows = MaxRowEnd(runs);
  const int hd = args.head_dim;
  const size_t qk_floats = static_cast<size_t>(n_rows) * 2 * args.n_k_heads * hd;
  if (scratch.size() < qk_floats) scratch.resize(qk_floats);
  float* qk = scratch.data();
  const int64_t n_norms = static_cast<int64_t>(n_rows) * args.n_k_heads;
  pool.ParallelFor(
      n_norms,
      [&](int64_t begin, int64_t end) {
        for (int64_t unit = begin; unit < end; ++unit) NormalizeQk(args, unit, qk);
      },
      n_norms * hd * 4);
  if (HasChunkedRun(args, runs)) {
    DeltaRuleHeads(args, runs, kernels, qk, pool);
    return;
  }
  // Units (value head, block of state rows), head-major.
  const int blocks = (hd + kStateRows - 1) / kStateRows;
  const int64_t n_units = static_cast<int64_t>(args.n_v_heads) * blocks;
  const int64_t cost = static_cast<int64_t>(n_rows) * args.n_v_heads * hd * hd * 6;
  pool.ParallelFor(
      n_units,
      [&](int64_t begin, int64_t end) {
        // Run by run, so that a task reads one contiguous span of each run's state (units are
        // head-major): a batch of decode rows streams its states as one run does.
        for (const RecurrentRun& run : runs) {
          for (int64_t unit = begin; unit < end; ++unit) {
            const int h = static_cast<int>(unit / blocks);
            const int j_begin = static_cast<int>(unit % blocks) * kStateRows;
            const int j_end = std::min(hd, j_begin + kStateRows);
            DeltaRuleRun(args, kernels, qk, run, h, j_begin, j_end);
          }
        }
      },
      cost);
}

namespace scalar {

void DeltaRule(const DeltaRuleStep& s) {
  const int hd = s.head_dim;
  for (int j = s.j_begin; j < s.j_end; ++j) {
    float* m = s.state + static_cast<size_t>(j) * hd;
    if (s.src != nullptr) {
      const float* src = s.src + static_cast<size_t>(j) * hd;
      for (int i = 0; i < hd; ++i) m[i] = src[i] * s.decay;
    } else {
      for (int i = 0; i < hd; ++i) m[i] = 0.0f * s.decay;
    }
    const float d = (s.v[j] - LaneDot(m, s.k, hd)) * s.beta;
    for (int i = 0; i < hd; ++i) m[i] += d * s.k[i];
    s.out[j] = LaneDot(m, s.q, hd) * s.scale;
  }
}

void ShortConvRows(const ConvRows& a) {
  static constexpr float kZeros[kMaxConvWidth] = {};
  const int hist = a.kernel - 1;
  // Row i of x' (hist state rows, then the rows of x).
  auto window_row = [&](int i) -> const float* {
    if (i >= hist) return a.x + static_cast<size_t>(i - hist) * a.x_stride;
    if (a.hist == nullptr) return kZeros;
    return a.hist + static_cast<size_t>(i) * a.hist_stride;
  };
  for (int t = 0; t < a.n_rows; ++t) {
    float sum[kMaxConvWidth] = {};  // per channel, over j in increasing order
    for (int j = 0; j < a.kernel; ++j) {
      const float* x = window_row(t + j);
      for (int c = 0; c < a.width; ++c) sum[c] += a.weight[c * a.kernel + j] * x[c];
    }
    float* out = a.out + static_cast<size_t>(t) * a.out_stride;
    for (int c = 0; c < a.width; ++c) out[c] = Silu(sum[c]);
  }
}

void MatAccumulate(const MatAcc& p) {
  for (int r = 0; r < p.n; ++r) {
    float* y = p.y + r * p.y_stride;
    for (int c = 0; c < p.m; ++c) {
      const float x = p.x[r * p.x_stride + c];
      const float* b = p.b + c * p.b_stride;
      for (int j = 0; j < p.w; ++j) y[j] += x * b[j];
    }
  }
}

}  // namespace scalar

void DeltaNetGatesRow(const float* alpha, const float* beta_in, const float* dt_bias,
                      const float* a, int n_heads, float* g, float* beta) {
  for (int h = 0; h < n_heads; ++h) {
    g[h] = Softplus(alpha[h] + dt_bias[h]) * a[h];
    beta[h] = Sigmoid(beta_in[h]);
  }
}

void SigmoidGateRow(float* x, const float* gate, int n) {
  for (int i = 0; i < n; ++i) x[i] *= Sigmoid(gate[i]);
}

void SigmoidScaleRow(float* x, float gate, int n) {
  const float factor = Sigmoid(gate);
  for (int i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace kvserve
