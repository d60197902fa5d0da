// Conversions between float32 and the stored weight types, row by row. These are the reference
// (GGML-compatible) encoders used by `kvserve convert` and `kvserve synth`, and the decoders used
// for embedding lookups.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"

namespace kvserve {

// Bytes one row of n elements takes in `type` (n a multiple of the block size).
size_t RowBytes(GgmlType type, int64_t n);

// Encodes n floats (n a multiple of the block size) into `type` at `out` (RowBytes(type, n)).
void QuantizeRow(GgmlType type, const float* x, int64_t n, uint8_t* out);

// Decodes n elements of `type` into floats.
void DequantizeRow(GgmlType type, const uint8_t* data, int64_t n, float* out);

}  // namespace kvserve
