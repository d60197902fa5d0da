#include "kernels/cpu/packed_floats.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/packed_weights.h"
#include "kernels/quantize.h"

namespace kvserve {

namespace {
constexpr int kRows = kPackRows;
constexpr int kLanes = 16;  // elements per vector

int64_t Vectors(int64_t n_in) { return (n_in + kLanes - 1) / kLanes; }

size_t ElementBytes(GgmlType type) {
  assert(HasPackedFloatLayout(type));
  return RowBytes(type, 1);
}
}  // namespace

bool HasPackedFloatLayout(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

size_t PackedFloatGroupBytes(GgmlType type, int64_t n_in) {
  return static_cast<size_t>(Vectors(n_in)) * kRows * kLanes * ElementBytes(type);
}

void PackFloatGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                     int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst) {
  const size_t element = ElementBytes(type);
  const size_t vector_bytes = kLanes * element;
  const size_t group_bytes = PackedFloatGroupBytes(type, n_in);
  for (int64_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(group, 0, group_bytes);
    for (int lane = 0; lane < kRows; ++lane) {
      const int64_t row = g * kRows + lane;
      if (row >= n_out) break;
      const uint8_t* stored = src + src_row_bytes * static_cast<size_t>(row);
      for (int64_t v = 0; v < Vectors(n_in); ++v) {
        const int64_t elements = n_in - kLanes * v < kLanes ? n_in - kLanes * v : kLanes;
        std::memcpy(group + (static_cast<size_t>(v) * kRows + lane) * vector_bytes,
                    stored + static_cast<size_t>(v) * vector_bytes, elements * element);
      }
    }
  }
}

void UnpackFloatRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out) {
  const size_t element = ElementBytes(type);
  const size_t vector_bytes = kLanes * element;
  const uint8_t* group =
      packed + static_cast<size_t>(row / kRows) * PackedFloatGroupBytes(type, n_in);
  const int lane = static_cast<int>(row % kRows);
  for (int64_t v = 0; v < Vectors(n_in); ++v) {
    const int64_t elements = n_in - kLanes * v < kLanes ? n_in - kLanes * v : kLanes;
    std::memcpy(out + static_cast<size_t>(v) * vector_bytes,
                group + (static_cast<size_t>(v) * kRows + lane) * vector_bytes, elements * element);
  }
}

}  // namespace kvserve
