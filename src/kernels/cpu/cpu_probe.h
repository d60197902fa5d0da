// The CPU backend's self-measurement and self-check (Backend::MeasureReadBandwidth,
// MeasureMatmulFlops, CheckKernels). Measurements run on the caller's ThreadPool; call them from
// the thread that owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/backend_checks.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

namespace kvserve {

// Streams through a buffer of `bytes` (touched first) with every thread of `pool`, each reading
// its own contiguous part with `kernels`' dot product (widest loads): bytes per second.
Measurement MeasureReadBandwidth(const KernelTable& kernels, ThreadPool& pool, uint64_t bytes,
                                 int repeats);

// Matmul (cpu/matmul.h) of m rows against an n_out x n_in matrix of random `type` weights:
// FLOP per second, counting 2 * m * n_out * n_in.
Measurement MeasureMatmulFlops(const KernelTable& kernels, GgmlType type, int m, int n_out,
                               int n_in, ThreadPool& pool, int repeats);

// One small matmul per weight type through `kernels` and through ScalarKernels() on the same
// inputs (block types: the same Q8_0 activations), compared element by element within
// terms * eps * sum|w*x| (terms = k + 16 for float types, 3 * k/32 + 16 for block types); the
// activation quantizer; and attention and GELU, which must equal the scalar twin bit for bit.
std::vector<KernelCheck> CheckKernelsAgainstScalar(const KernelTable& kernels);

}  // namespace kvserve
