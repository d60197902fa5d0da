#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include "kernels/cpu/packed_weights.h"
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
// cache, and keep the static split (each thread's rows stay in its own caches across the tiles).
constexpr int kMaxDynamicRows = 4;

}  // namespace

void Matmul(const KernelTable& kernels, const WeightMatrix& w, const float* x, int m, float* y,
            MatmulScratch& scratch, ThreadPool& pool, DecodeTileChooser* decode_tiles) {
  MatmulTileFn tile_fn = MatmulFor(kernels, w.type);
  const uint8_t* w_bytes = w.data;
  size_t w_row_bytes = w.row_bytes;
  const MatmulTileFn packed_fn = w.packed != nullptr ? PackedMatmulFor(kernels, w.type) : nullptr;
  DecodeTileChooser::Pick pick;
  if (packed_fn != nullptr) {
    tile_fn = packed_fn;
    w_bytes = w.packed;
    w_row_bytes = PackedGroupBytes(w.type, w.n_in);
  }
  if (m == 1 && decode_tiles != nullptr) pick = decode_tiles->Next(w.type, tile_fn);
  if (pick.fn != nullptr) tile_fn = pick.fn;
  assert(tile_fn != nullptr);
  const int k = static_cast<int>(w.n_in);
  const uint8_t* x_bytes = reinterpret_cast<const uint8_t*>(x);
  size_t x_row_bytes = sizeof(float) * k;
  const GgmlType x_type = ActivationTypeFor(w.type);
  if (x_type != GgmlType::kF32) {
    // Q8_0, Q8_1 and Q8_K through the table (SIMD, same bits as the scalar ones).
    x_row_bytes = RowBytes(x_type, k);
    const size_t needed = static_cast<size_t>(m) * x_row_bytes;
    if (scratch.x_quant.size() < needed) scratch.x_quant.resize(needed);
    uint8_t* xq = scratch.x_quant.data();
    pool.ParallelFor(
        m,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            uint8_t* row = xq + i * x_row_bytes;
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
    x_bytes = xq;
  }
  const int64_t n_chunks = (w.n_out + kRowGrain - 1) / kRowGrain;
  auto run_tile = [&](int64_t begin, int64_t end, int thread) {
    MatmulTile tile{
        .w = w_bytes,
        .w_row_bytes = w_row_bytes,
        .x = x_bytes,
        .x_row_bytes = x_row_bytes,
        .m = m,
        .k = k,
        .n_begin = static_cast<int>(begin * kRowGrain),
        .n_end = static_cast<int>(std::min(end * kRowGrain, w.n_out)),
        .y = y,
        .ldy = static_cast<int>(w.n_out),
        .scratch = &scratch.tiles[thread],
    };
    tile_fn(tile);
  };
  const int64_t cost = static_cast<int64_t>(m) * k * w.n_out;
  if (m <= kMaxDynamicRows) {
    // Memory bound: the threads take pieces as they finish, smaller and smaller
    // (ThreadPool::ParallelOwnedChunks).
    if (pick.trial < 0) {
      pool.ParallelOwnedChunks(n_chunks, run_tile, cost);
    } else {
      const auto start = std::chrono::steady_clock::now();
      pool.ParallelOwnedChunks(n_chunks, run_tile, cost);
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
      decode_tiles->Record(w.type, pick.trial, seconds.count(),
                           w.row_bytes * static_cast<size_t>(w.n_out));
    }
  } else {
    pool.ParallelFor(n_chunks, run_tile, cost);
  }
}

}  // namespace kvserve
