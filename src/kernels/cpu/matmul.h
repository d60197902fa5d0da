// Matrix multiplication against stored weights, threaded by output rows (never by the inner
// dimension, so results do not depend on the thread count or batch size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/decode_tile_chooser.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/weight_matrix.h"
#include "util/thread_pool.h"

namespace kvserve {

// Reusable buffers: quantized activations (ActivationTypeFor's format) (grow, never shrink) and one
// tile scratch per thread of the pool the matmul runs on. One per runner.
struct MatmulScratch {
  explicit MatmulScratch(int n_threads) : tiles(std::make_unique<TileScratch[]>(n_threads)) {}
  std::vector<uint8_t> x_quant;          // [m rows of the activation format]
  std::unique_ptr<TileScratch[]> tiles;  // [pool size]
};

// y[m, n_out] = x[m, n_in] · Wᵀ.  x and y are row-major float32 with n_in / n_out columns.
// `scratch` must have a tile scratch for each of pool.size() threads. `decode_tiles` (optional)
// picks the tile of a packed matrix for one activation row, and is told how long it took.
void Matmul(const KernelTable& kernels, const WeightMatrix& w, const float* x, int m, float* y,
            MatmulScratch& scratch, ThreadPool& pool, DecodeTileChooser* decode_tiles = nullptr);

// ys[i][m, n_out of matrix i] = x[m, n_in] · matrices[i]ᵀ: Matmul for each matrix, the same bits.
// At decode (m <= 4 rows), up to 4 small matrices (4 MiB of weights in all) of one activation
// format (the q, k and v projections; gate and up) run as one job: the activations are quantized
// once, and the threads take pieces of all the matrices' row groups one after another, so that
// the small matrices (k and v) cost no hand-off and no wait of their own. Otherwise, and while
// the decode tile chooser is timing a matrix's type, one Matmul per matrix.
inline constexpr size_t kMaxSameInput = 4;
void MatmulSameInput(const KernelTable& kernels, std::span<const WeightMatrix* const> matrices,
                     const float* x, int m, std::span<float* const> ys, MatmulScratch& scratch,
                     ThreadPool& pool, DecodeTileChooser* decode_tiles = nullptr);

}  // namespace kvserve
