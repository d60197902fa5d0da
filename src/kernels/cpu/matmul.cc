#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>

#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/prefetch_ahead.h"
#include "kernels/quantize.h"

namespace kvserve {

namespace {
// Output rows are handed to threads in multiples of this, so tiles stay SIMD-friendly.
constexpr int64_t kRowGrain = 16;
static_assert(kRowGrain % kPackRows == 0, "packed kernels start at a 16-row group");
// Up to this many activation rows (decode steps), a matmul streams its weights from memory once and
// its rows are handed out in shrinking pieces to whichever thread is free: on a shared or noisy
// machine one thread often runs 10-30% slower than the other, and an even static split then
// waits for it; pieces of a fixed 1/16 of the matrix still left one thread waiting up to a piece
// at the end (4% of a tinyllama decode step on a Zen 3 VM). Each thread first takes its pieces
// from its own contiguous share of the rows (ThreadPool::ParallelOwnedChunks), so that they are
// one forward stream: pieces taken from the front of the whole matrix in turn had made every
// thread restart its stream at each piece (a Zen 4 VM, 2 threads, alternating, medians: tinyllama
// Q4_K_M decode 55.8 -> 61.6 t/s, SmolLM2 Q4_1 205.9 -> 231.6). More rows reuse the weights from
// cache, and keep the static split (each thread's rows stay in its own caches across the tiles),
// except float weights (below).
constexpr int kMaxDynamicRows = 4;
// Whether a matmul of m activation rows hands its rows out in pieces as the threads finish
// (ParallelOwnedChunks) rather than split evenly once. Float weights at prefill do too: their tiles
// copy each piece's weights into panels anyway (float_matmul_avx512.cc), so a piece costs what its
// share of a static split does, and the static split had the calling thread waiting for the other
// in 5-20% of each matmul (`kvserve bench --profile`, tinyllama F16 pp128, Zen 5 VM, 2 threads).
// Runs there, the order swapped every round (pp128, 2 threads, -r 2, medians): tinyllama F16 130.0
// -> 138.3 t/s (ahead in 11 of 12), gpt2 BF16 1182 -> 1358 (5 of 8); tinyllama Q8_0 281 -> 276 (3
// of 8), so the quantized types keep the static split.
bool SplitsAsThreadsFinish(GgmlType type, int m) {
  return m <= kMaxDynamicRows || type == GgmlType::kF32 || type == GgmlType::kF16 ||
         type == GgmlType::kBF16;
}
// MatmulSameInput runs its matrices as one job up to this many weight bytes in all. In-process
// A/B on a Zen 4 VM (2 threads, the two forms alternating layer by layer, mean µs per call at
// decode): SmolLM2-135M's q/k/v (0.4 MB) 20.6 against 31.1, its gate/up (1 MB) 66.1 against 71.7;
// Gemma 3 270M's 33.2 / 45.5 and 75.7 / 79.9; tinyllama's q/k/v (3 MB) within +-4% either way,
// its gate/up (13 MB) 1-4% slower as one job in 3 runs of 3, so those keep a job per matrix.
constexpr size_t kOneJobMaxBytes = size_t{4} << 20;

// One matrix of a call, ready to run: its tile (the packed layout's where it has one, the decode
// chooser's pick at one activation row) and the format its activations take.
struct MatmulPlan {
  const WeightMatrix* w = nullptr;
  MatmulTileFn tile_fn = nullptr;
  const uint8_t* w_bytes = nullptr;
  size_t w_row_bytes = 0;  // of a row, or of a 16-row group when packed
  GgmlType x_type = GgmlType::kF32;
  DecodeTileChooser::Pick pick;
  int64_t n_groups = 0;  // of kRowGrain outputs
  bool packed = false;   // w_bytes holds 16-row groups of w_row_bytes each, one after another
};

MatmulPlan PlanMatmul(const KernelTable& kernels, const WeightMatrix& w, int m,
                      DecodeTileChooser* decode_tiles) {
  MatmulPlan plan{.w = &w,
                  .tile_fn = MatmulFor(kernels, w.type),
                  .w_bytes = w.data,
                  .w_row_bytes = w.row_bytes,
                  .x_type = ActivationTypeFor(w.type),
                  .n_groups = (w.n_out + kRowGrain - 1) / kRowGrain};
  const MatmulTileFn packed_fn = w.packed != nullptr ? PackedMatmulFor(kernels, w.type) : nullptr;
  if (packed_fn != nullptr) {
    plan.tile_fn = packed_fn;
    plan.w_bytes = w.packed;
    plan.w_row_bytes = PackedGroupBytes(w.type, w.n_in);
    plan.packed = true;
  }
  if (m == 1 && decode_tiles != nullptr) plan.pick = decode_tiles->Next(w.type, plan.tile_fn);
  if (m > 1 && m <= kPrefetchLevelRows && decode_tiles != nullptr) {
    plan.tile_fn = decode_tiles->ChosenForFewRows(w.type, plan.tile_fn);
  }
  if (plan.pick.fn != nullptr) plan.tile_fn = plan.pick.fn;
  assert(plan.tile_fn != nullptr);
  return plan;
}

// The m activation rows of k floats at x in `x_type` (Q8_0, Q8_1 and Q8_K through the table: SIMD,
// the scalar encoders' bits), in scratch.x_quant; x itself for F32.
struct Activations {
  const uint8_t* bytes;
  size_t row_bytes;
};
Activations QuantizeActivations(const KernelTable& kernels, GgmlType x_type, const float* x, int m,
                                int k, MatmulScratch& scratch, ThreadPool& pool) {
  if (x_type == GgmlType::kF32) {
    return {reinterpret_cast<const uint8_t*>(x), sizeof(float) * static_cast<size_t>(k)};
  }
  const size_t row_bytes = RowBytes(x_type, k);
  const size_t needed = static_cast<size_t>(m) * row_bytes;
  if (scratch.x_quant.size() < needed) scratch.x_quant.resize(needed);
  uint8_t* xq = scratch.x_quant.data();
  pool.ParallelFor(
      m,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          uint8_t* row = xq + i * row_bytes;
          if (x_type == GgmlType::kQ8_0) {
            kernels.quantize_row_q8_0(x + i * k, k, reinterpret_cast<BlockQ8_0*>(row));
          } else if (x_type == GgmlType::kQ8_1) {
            kernels.quantize_row_q8_1(x + i * k, k, reinterpret_cast<BlockQ8_1*>(row));
          } else if (x_type == GgmlType::kQ8_K) {
            kernels.quantize_row_q8_k(x + i * k, k, reinterpret_cast<BlockQ8_K*>(row));
          } else {
            QuantizeRow(x_type, x + i * k, k, row);
          }
        }
      },
      static_cast<int64_t>(m) * k * 4);
  return {xq, row_bytes};
}

// Output groups [begin, end) of the plan's matrix, into y (n_out columns).
void RunGroups(const MatmulPlan& plan, const Activations& a, int m, int64_t begin, int64_t end,
               float* y, TileScratch* scratch) {
  const WeightMatrix& w = *plan.w;
  const MatmulTile tile{
      .w = plan.w_bytes,
      .w_row_bytes = plan.w_row_bytes,
      .x = a.bytes,
      .x_row_bytes = a.row_bytes,
      .m = m,
      .k = static_cast<int>(w.n_in),
      .n_begin = static_cast<int>(begin * kRowGrain),
      .n_end = static_cast<int>(std::min(end * kRowGrain, w.n_out)),
      .y = y,
      .ldy = static_cast<int>(w.n_out),
      .scratch = scratch,
  };
  if (plan.packed && m <= kPrefetchLevelRows) {  // memory bound: the piece is one new stream
    PrefetchPieceStart(plan.w_bytes + static_cast<size_t>(begin) * plan.w_row_bytes,
                       static_cast<size_t>(end - begin) * plan.w_row_bytes);
  }
  plan.tile_fn(tile);
}

void RunPlan(const MatmulPlan& plan, const Activations& a, int m, float* y, MatmulScratch& scratch,
             ThreadPool& pool, DecodeTileChooser* decode_tiles) {
  const WeightMatrix& w = *plan.w;
  auto run_groups = [&](int64_t begin, int64_t end, int thread) {
    RunGroups(plan, a, m, begin, end, y, &scratch.tiles[thread]);
  };
  const int64_t cost = static_cast<int64_t>(m) * w.n_in * w.n_out;
  if (!SplitsAsThreadsFinish(w.type, m)) {
    pool.ParallelFor(plan.n_groups, run_groups, cost);
    return;
  }
  // Memory bound: the threads take pieces as they finish, smaller and smaller
  // (ThreadPool::ParallelOwnedChunks).
  if (plan.pick.trial < 0) {
    pool.ParallelOwnedChunks(plan.n_groups, run_groups, cost);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  pool.ParallelOwnedChunks(plan.n_groups, run_groups, cost);
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  decode_tiles->Record(w.type, plan.pick.trial, seconds.count(),
                       w.row_bytes * static_cast<size_t>(w.n_out));
}

void QuantizeAndRun(const KernelTable& kernels, const MatmulPlan& plan, const float* x, int m,
                    float* y, MatmulScratch& scratch, ThreadPool& pool,
                    DecodeTileChooser* decode_tiles) {
  const Activations a = QuantizeActivations(kernels, plan.x_type, x, m,
                                            static_cast<int>(plan.w->n_in), scratch, pool);
  RunPlan(plan, a, m, y, scratch, pool, decode_tiles);
}

}  // namespace

void Matmul(const KernelTable& kernels, const WeightMatrix& w, const float* x, int m, float* y,
            MatmulScratch& scratch, ThreadPool& pool, DecodeTileChooser* decode_tiles) {
  QuantizeAndRun(kernels, PlanMatmul(kernels, w, m, decode_tiles), x, m, y, scratch, pool,
                 decode_tiles);
}

void MatmulSameInput(const KernelTable& kernels, std::span<const WeightMatrix* const> matrices,
                     const float* x, int m, std::span<float* const> ys, MatmulScratch& scratch,
                     ThreadPool& pool, DecodeTileChooser* decode_tiles) {
  assert(matrices.size() == ys.size());
  std::array<MatmulPlan, kMaxSameInput> plans;
  const size_t n = matrices.size();
  size_t bytes = 0;
  for (const WeightMatrix* w : matrices) bytes += w->row_bytes * static_cast<size_t>(w->n_out);
  bool one_job = n <= kMaxSameInput && m <= kMaxDynamicRows && bytes <= kOneJobMaxBytes;
  for (size_t i = 0; i < n && one_job; ++i) {
    plans[i] = PlanMatmul(kernels, *matrices[i], m, decode_tiles);
    one_job = plans[i].pick.trial < 0 && plans[i].x_type == plans[0].x_type &&
              matrices[i]->n_in == matrices[0]->n_in;
  }
  if (!one_job) {  // one call each (the chooser's trials are timed per call)
    for (size_t i = 0; i < n; ++i) {
      const bool planned = i < kMaxSameInput && plans[i].w != nullptr;
      QuantizeAndRun(kernels,
                     planned ? plans[i] : PlanMatmul(kernels, *matrices[i], m, decode_tiles), x, m,
                     ys[i], scratch, pool, decode_tiles);
    }
    return;
  }
  const Activations a = QuantizeActivations(kernels, plans[0].x_type, x, m,
                                            static_cast<int>(matrices[0]->n_in), scratch, pool);
  int64_t n_groups = 0;
  int64_t cost = 0;
  for (size_t i = 0; i < n; ++i) {
    n_groups += plans[i].n_groups;
    cost += static_cast<int64_t>(m) * matrices[i]->n_in * matrices[i]->n_out;
  }
  // Groups [begin, end) of the matrices' groups one after another.
  auto run_groups = [&](int64_t begin, int64_t end, int thread) {
    int64_t first = 0;
    for (size_t i = 0; i < n && begin < end; first += plans[i].n_groups, ++i) {
      const int64_t last = first + plans[i].n_groups;
      if (begin >= last) continue;
      const int64_t piece_end = std::min(end, last);
      RunGroups(plans[i], a, m, begin - first, piece_end - first, ys[i], &scratch.tiles[thread]);
      begin = piece_end;
    }
  };
  pool.ParallelOwnedChunks(n_groups, run_groups, cost);
}

}  // namespace kvserve
