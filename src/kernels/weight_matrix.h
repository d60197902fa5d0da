// The weights a forward pass reads, as a backend sees them: a borrowed view of a 2-D weight as a
// backend multiplies it (n_out rows of n_in elements in the stored GGML type, plus the backend's
// own copy when it prepared one at load), and the small float vectors (norm weights, biases, RoPE
// frequency divisors). Both go through Backend::PrepareWeights at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// A float32 vector the forward pass reads: decoded on the host at load (model/weight_loader.h),
// then handed to Backend::PrepareWeights, which points `prepared` at its own copy when it keeps
// one (device memory); the CPU backend reads the host values. Models read data(), never host.
struct WeightVector {
  std::vector<float> host;          // [n]
  const float* prepared = nullptr;  // the backend's copy, owned by the model's weights; or none

  const float* data() const { return prepared != nullptr ? prepared : host.data(); }
  size_t size() const { return host.size(); }
  bool empty() const { return host.empty(); }
};

}  // namespace kvserve
