// Matrix multiplication against stored weights, threaded by output rows (never by the inner
// dimension, so results do not depend on the thread count or batch size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

namespace kvserve {

// A borrowed view of a 2-D weight: n_out rows of n_in elements, in the stored type.
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;  // borrowed from the model file mapping
  int64_t n_out = 0;
  int64_t n_in = 0;
  size_t row_bytes = 0;
  // The same matrix in the x16 layout of packed_weights.h, when it was packed at load (the owner of
  // the WeightMatrix owns these bytes); Matmul uses it when the kernel table has a packed kernel.
  const uint8_t* packed = nullptr;
};

// Reusable buffer for quantized activations; grows, never shrinks. One per runner.
struct MatmulScratch {
  std::vector<BlockQ8_0> x_q8;
};

// y[m, n_out] = x[m, n_in] · Wᵀ.  x and y are row-major float32 with n_in / n_out columns.
void Matmul(const KernelTable& kernels, const WeightMatrix& w, const float* x, int m, float* y,
            MatmulScratch& scratch, ThreadPool& pool);

}  // namespace kvserve
