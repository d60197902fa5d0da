// A borrowed view of a 2-D weight as a backend multiplies it: n_out rows of n_in elements in the
// stored GGML type, plus the backend's own copy when it prepared one at load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"

namespace kvserve {

struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;  // borrowed from the model file mapping
  int64_t n_out = 0;
  int64_t n_in = 0;
  size_t row_bytes = 0;
  // The same matrix in the backend's layout (the CPU backend's x16 layout of
  // cpu/packed_weights.h), when Backend::PrepareWeights made one; owned by the model's weights.
  const uint8_t* packed = nullptr;
};

}  // namespace kvserve
