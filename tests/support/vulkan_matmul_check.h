// The matmul check of the Vulkan backend's tests (vulkan_backend_test, vulkan_matmul_types_test):
// a random matrix of a weight type multiplied on the Vulkan backend against the exact sum of its
// dequantized weights times x as the shader reads x (rounded to the CPU backend's activation type
// for the quantized weights, ActivationTypeFor), and against the CPU backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/backend.h"

namespace kvserve::testing {

// n normal floats of standard deviation `scale`.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f);

// A matrix quantized from random values, with its host bytes and its exact (dequantized) values.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [n_out, n_in] as stored
  WeightMatrix matrix;
  std::shared_ptr<uint8_t> storage;
};
TestMatrix MakeMatrix(GgmlType type, int n_out, int n_in, uint32_t seed);

// Any model file (PrepareWeights takes one).
const GgufFile& AnyFile();
// Prepares `m` on `backend` (the Vulkan copy, or the CPU's packing) into a copy of the matrix.
WeightMatrix Prepared(const Backend& backend, TestMatrix& m);

// x as a matmul of `type` reads it: rounded by the CPU backend's quantizer to the type's
// activation format (Q8_0, Q8_1 or Q8_K: ActivationTypeFor), as both backends round it; f32 for
// the float types.  x: [n_in]
std::vector<float> AsRead(GgmlType type, const float* x, int n_in);

struct Shape {
  int n_out;
  int n_in;
  int n_rows;
};

// How far the Vulkan backend's outputs were from the CPU backend's: the largest |difference|,
// and the largest |difference| / Σ|w x| of its output.
struct MatmulDifference {
  double max_abs = 0;
  double max_relative = 0;
};

// Checks every output of an `s` matmul of random `type` weights on the Vulkan backend (x and y in
// device memory): within a float-summation bound of the exact sum (4 (n_in + 96) 2^-24 Σ|w x|;
// for Q8_1 activations the weights' offsets meet x's stored block sums, as the kernels read them),
// and within twice that of the CPU backend (plus the CPU's f16/bf16 rounding of x for those
// weights). Reports the first few failures with the shape in the trace.
MatmulDifference CheckMatmul(GgmlType type, const Shape& s, uint32_t seed);

// Rows 0, 7 and 15 of a 19 x 512 matmul of `type` on `vulkan` in a batch of 16 are the bits each
// gives alone.
void ExpectBatchOf16EqualsAlone(const Backend& vulkan, GgmlType type);

}  // namespace kvserve::testing
