// What the in-process decode A/B programs share (bench/kquant_decode_ab.cc,
// bench/blocks32_decode_ab.cc): one packed weight matrix in several copies (so that every call
// reads from DRAM) with one activation row, and the time of one matmul as the engine's decode runs
// it (the ThreadPool, ParallelOwnedChunks over 16-row groups, one activation row).
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "util/large_memory.h"
#include "util/thread_pool.h"

namespace kvserve::bench {

// One weight matrix of n x k in the packed x16 layout, `copies` times, and one activation row in
// `x_type` (Q8_0 for the 32-element types, Q8_K for the K-quants).
struct DecodeProblem {
  GgmlType type;
  int n, k;
  size_t group_bytes;
  uint8_t* storage = nullptr;  // owns the copies
  std::vector<uint8_t*> copies;
  std::vector<uint8_t> x;

  DecodeProblem(GgmlType t, GgmlType x_type, int n_out, int n_in, int n_copies)
      : type(t), n(n_out), k(n_in) {
    const size_t row_bytes = RowBytes(type, k);
    std::vector<uint8_t> stored(row_bytes * n);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> row(k);
    for (int j = 0; j < n; ++j) {
      for (float& v : row) v = dist(rng);
      QuantizeRow(type, row.data(), k, stored.data() + row_bytes * j);
    }
    group_bytes = PackedGroupBytes(type, k);
    // One allocation for all the copies, side by side, as the CPU backend packs a model's matrices
    // (cpu_backend.cc PrepareWeights): on huge pages even where one copy is below 2 MiB.
    storage = static_cast<uint8_t*>(AllocateLarge(bytes() * n_copies));
    for (int c = 0; c < n_copies; ++c) {
      uint8_t* p = storage + bytes() * c;
      PackGroups(type, stored.data(), row_bytes, n, k, 0, groups(), p);
      copies.push_back(p);
    }
    x.resize(RowBytes(x_type, k));
    for (float& v : row) v = dist(rng);
    QuantizeRow(x_type, row.data(), k, x.data());
  }
  ~DecodeProblem() { FreeLarge(storage); }
  DecodeProblem(const DecodeProblem&) = delete;
  DecodeProblem& operator=(const DecodeProblem&) = delete;
  int groups() const { return n / 16; }
  size_t bytes() const { return group_bytes * groups(); }
};

// Seconds per matmul of run_tile(const MatmulTile&) over `calls` copies in turn (from next_copy),
// as the engine's decode matmul runs it; y gets the outputs. At most 8 threads.
template <typename RunTile>
double TimeDecodeMatmul(ThreadPool& pool, RunTile&& run_tile, const DecodeProblem& p, int calls,
                        int& next_copy, std::vector<float>& y) {
  TileScratch scratch[8];
  const auto t0 = std::chrono::steady_clock::now();
  for (int call = 0; call < calls; ++call) {
    const uint8_t* w = p.copies[next_copy++ % p.copies.size()];
    pool.ParallelOwnedChunks(p.groups(), [&](int64_t g0, int64_t g1, int thread) {
      const MatmulTile tile{.w = w,
                            .w_row_bytes = p.group_bytes,
                            .x = p.x.data(),
                            .x_row_bytes = p.x.size(),
                            .m = 1,
                            .k = p.k,
                            .n_begin = static_cast<int>(g0 * 16),
                            .n_end = static_cast<int>(g1 * 16),
                            .y = y.data(),
                            .ldy = p.n,
                            .scratch = &scratch[thread]};
      run_tile(tile);
    });
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace kvserve::bench
