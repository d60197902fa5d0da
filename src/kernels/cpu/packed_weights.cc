#include "kernels/cpu/packed_weights.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/packed_blocks32.h"
#include "kernels/cpu/packed_floats.h"
#include "kernels/cpu/packed_kquants.h"

namespace kvserve {

namespace {
constexpr int kBlock = 32;

size_t StoredBlockBytes(GgmlType type) {
  return type == GgmlType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
}

bool IsK(GgmlType type) { return HasPackedKLayout(type); }
}  // namespace

bool HasPackedLayout(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || IsK(type) ||
         HasPacked32Layout(type) || HasPackedFloatLayout(type);
}

size_t PackedQuantBytes(GgmlType type) {
  assert(HasPackedLayout(type));
  return type == GgmlType::kQ8_0 ? 8 * 64 : 4 * 64;
}

size_t PackedGroupBytes(GgmlType type, int64_t n_in) {
  if (IsK(type)) return PackedKGroupBytes(type, n_in);
  if (HasPacked32Layout(type)) return Packed32GroupBytes(type, n_in);
  if (HasPackedFloatLayout(type)) return PackedFloatGroupBytes(type, n_in);
  return PackedBundles(PackedQuantBytes(type), n_in / kBlock).GroupBytes();
}

size_t PackedMatrixBytes(GgmlType type, int64_t n_out, int64_t n_in) {
  const size_t groups = static_cast<size_t>((n_out + kPackRows - 1) / kPackRows);
  return groups * PackedGroupBytes(type, n_in);
}

void PackGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst) {
  if (HasPacked32Layout(type)) {
    return Pack32Groups(type, src, src_row_bytes, n_out, n_in, group_begin, group_end, dst);
  }
  if (IsK(type)) {
    return PackKGroups(type, src, src_row_bytes, n_out, n_in, group_begin, group_end, dst);
  }
  if (HasPackedFloatLayout(type)) {
    return PackFloatGroups(type, src, src_row_bytes, n_out, n_in, group_begin, group_end, dst);
  }
  assert(HasPackedLayout(type) && n_in % kBlock == 0);
  const bool q8 = type == GgmlType::kQ8_0;
  const int64_t n_blocks = n_in / kBlock;
  const size_t block_bytes = StoredBlockBytes(type);
  assert(src_row_bytes >= block_bytes * static_cast<size_t>(n_blocks));
  const BlockBundles bundles = PackedBundles(PackedQuantBytes(type), n_blocks);
  const int dwords = q8 ? 8 : 4;
  for (int64_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g) * PackedGroupBytes(type, n_in);
    std::memset(group, 0, PackedGroupBytes(type, n_in));
    for (int lane = 0; lane < kPackRows; ++lane) {
      const int64_t row = g * kPackRows + lane;
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* quants = group + bundles.QuantsOffset(b);
        if (row >= n_out) {
          if (q8) {
            for (int d = 0; d < dwords; ++d) std::memset(quants + 64 * d + 4 * lane, 0x80, 4);
          }
          continue;
        }
        const uint8_t* block =
            src + src_row_bytes * static_cast<size_t>(row) + block_bytes * static_cast<size_t>(b);
        std::memcpy(group + bundles.SideOffset(b) + 2 * lane, block, 2);
        for (int d = 0; d < dwords; ++d) {
          uint32_t dword;
          std::memcpy(&dword, block + 2 + 4 * d, 4);
          if (q8) dword ^= 0x80808080u;
          std::memcpy(quants + 64 * d + 4 * lane, &dword, 4);
        }
      }
    }
  }
}

void UnpackRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out) {
  if (IsK(type)) return UnpackKRow(type, packed, n_in, row, out);
  if (HasPacked32Layout(type)) return Unpack32Row(type, packed, n_in, row, out);
  if (HasPackedFloatLayout(type)) return UnpackFloatRow(type, packed, n_in, row, out);
  assert(HasPackedLayout(type) && n_in % kBlock == 0);
  const bool q8 = type == GgmlType::kQ8_0;
  const int64_t n_blocks = n_in / kBlock;
  const size_t block_bytes = StoredBlockBytes(type);
  const BlockBundles bundles = PackedBundles(PackedQuantBytes(type), n_blocks);
  const uint8_t* group =
      packed + static_cast<size_t>(row / kPackRows) * PackedGroupBytes(type, n_in);
  const int lane = static_cast<int>(row % kPackRows);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = out + block_bytes * static_cast<size_t>(b);
    std::memcpy(block, group + bundles.SideOffset(b) + 2 * lane, 2);
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    for (int d = 0; d < (q8 ? 8 : 4); ++d) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t byte = quants[64 * d + 4 * lane + i];
        block[2 + 4 * d + i] = q8 ? byte ^ 0x80 : byte;
      }
    }
  }
}

}  // namespace kvserve
