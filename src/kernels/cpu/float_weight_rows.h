// Where a float-weight matmul tile finds its weight rows, in the stored layout or in the x16
// layout of packed_floats.h. Integer arithmetic only, in an anonymous namespace (as
// prefetch_ahead.h), so that each ISA's translation unit gets its own copy and no code compiled for
// one instruction set is shared with another through COMDAT folding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"

namespace kvserve {
namespace {

// kBytesPerElement: 4 (F32) or 2 (F16, BF16). Stored (kX16 false): row j at t.w + j *
// t.w_row_bytes, its elements one after another. x16: t.w_row_bytes per 16-row group, 16-element
// vector v of row l of a group at (16 v + l) vectors from the group's start. In both, elements kk
// .. kk + 7 of a row (kk a multiple of 8) are contiguous.
template <size_t kBytesPerElement, bool kX16>
struct FloatWeightRows {
  static constexpr size_t kElementBytes = kBytesPerElement;
  static constexpr int kVectorElements = 16;  // of the layout's vectors (not the group's rows)
  static constexpr size_t kVectorBytes = kVectorElements * kElementBytes;
  // Bytes from vector v of a row to vector v + 1 (x16: a whole group's vector v).
  static constexpr size_t kStep = kX16 ? kPackRows * kVectorBytes : kVectorBytes;
  static const uint8_t* Row(const MatmulTile& t, int j) {
    if constexpr (kX16) {
      return t.w + static_cast<size_t>(j / kPackRows) * t.w_row_bytes +
             static_cast<size_t>(j % kPackRows) * kVectorBytes;
    } else {
      return t.w + static_cast<size_t>(j) * t.w_row_bytes;
    }
  }
  // Bytes from a row's start to its element kk (a multiple of 8).
  static size_t Offset(int kk) {
    return static_cast<size_t>(kk / kVectorElements) * kStep +
           static_cast<size_t>(kk % kVectorElements) * kElementBytes;
  }
};

}  // namespace
}  // namespace kvserve
