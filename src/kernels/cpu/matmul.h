// Matrix multiplication against stored weights, threaded by output rows (never by the inner
// dimension, so results do not depend on the thread count or batch size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

}  // namespace kvserve
