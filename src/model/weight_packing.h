// Repacking a loaded model's Q8_0/Q4_0 matrices into the x16 layout of kernels/packed_weights.h,
// for kernel tables that have packed kernels. Kept apart from weights.cc so that loading a model
// (and its fuzzer) needs no kernel table.
#pragma once

#include <cstddef>

#include "io/gguf_reader.h"
#include "kernels/cpu/kernels.h"
#include "model/weights.h"

namespace kvserve {

// Repacks every matrix of `weights` that `kernels` has a packed kernel for into
// weights.packed_storage (WeightMatrix::packed points there), then drops the stored bytes from
// resident memory (file mappings only; a tied token embedding reads its rows from the packed
// output). Returns the bytes packed; 0 when nothing was (no packed kernels, or no memory for the
// copy: the stored layout keeps working).
size_t PackWeights(const KernelTable& kernels, const GgufFile& file, ModelWeights& weights);

}  // namespace kvserve
