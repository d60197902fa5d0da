#include "kernels/cpu/packed_blocks32.h"

#include <cassert>
#include <cstring>

namespace kvserve {

namespace {

constexpr int kLanes = 16;
constexpr int kBlock = 32;

bool HasQh(GgmlType type) { return type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1; }
bool HasMin(GgmlType type) { return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1; }

// Byte offsets inside a stored block, and the bytes of its scale d (MXFP4's e: 1).
struct Fields {
  size_t d, m, qh, quants, d_bytes = 2;
};
Fields FieldsOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m), 0, offsetof(BlockQ4_1, quants)};
    case GgmlType::kQ5_0:
      return {offsetof(BlockQ5_0, d), 0, offsetof(BlockQ5_0, qh), offsetof(BlockQ5_0, quants)};
    case GgmlType::kQ5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m), offsetof(BlockQ5_1, qh),
              offsetof(BlockQ5_1, quants)};
    case GgmlType::kMXFP4:
      return {offsetof(BlockMxfp4, e), 0, 0, offsetof(BlockMxfp4, quants), 1};
    default:
      return {offsetof(BlockIq4Nl, d), 0, 0, offsetof(BlockIq4Nl, quants)};
  }
}

// The permutation of packed_blocks32.h: stored qh bit -> packed bit.
int PackedBit(int stored_bit) {
  const int h = stored_bit / 16, d = stored_bit % 16 / 4, k = stored_bit % 4;
  return 8 * k + d + 4 * h;
}

uint32_t PermuteQh(uint32_t qh) {
  uint32_t out = 0;
  for (int b = 0; b < 32; ++b) out |= ((qh >> b) & 1u) << PackedBit(b);
  return out;
}

uint32_t UnpermuteQh(uint32_t packed) {
  uint32_t out = 0;
  for (int b = 0; b < 32; ++b) out |= ((packed >> PackedBit(b)) & 1u) << b;
  return out;
}

}  // namespace

bool HasPacked32Layout(GgmlType type) {
  return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1 ||
         type == GgmlType::kIQ4_NL || type == GgmlType::kMXFP4;
}

size_t Packed32GroupBytes(GgmlType type, int64_t n_in) {
  return Packed32Bundles(type, n_in / kBlock).GroupBytes();
}

void Pack32Groups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                  int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst) {
  assert(HasPacked32Layout(type) && n_in % kBlock == 0);
  const Fields f = FieldsOf(type);
  const size_t block_bytes = TraitsOf(type).block_bytes;
  const int64_t n_blocks = n_in / kBlock;
  const size_t group_bytes = Packed32GroupBytes(type, n_in);
  const BlockBundles bundles = Packed32Bundles(type, n_blocks);
  for (int64_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(group, 0, group_bytes);
    for (int lane = 0; lane < kLanes; ++lane) {
      const int64_t row = g * kLanes + lane;
      if (row >= n_out) continue;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block =
            src + src_row_bytes * static_cast<size_t>(row) + block_bytes * static_cast<size_t>(b);
        uint8_t* quant = group + bundles.QuantsOffset(b);
        uint8_t* side = group + bundles.SideOffset(b);
        for (int d = 0; d < 4; ++d)
          std::memcpy(quant + 64 * d + 4 * lane, block + f.quants + 4 * d, 4);
        if (HasQh(type)) {
          uint32_t qh;
          std::memcpy(&qh, block + f.qh, 4);
          const uint32_t p = PermuteQh(qh);
          std::memcpy(quant + 4 * 64 + 4 * lane, &p, 4);
        }
        std::memcpy(side + f.d_bytes * lane, block + f.d, f.d_bytes);
        if (HasMin(type)) std::memcpy(side + 32 + 2 * lane, block + f.m, 2);
      }
    }
  }
}

void Unpack32Row(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out) {
  assert(HasPacked32Layout(type) && n_in % kBlock == 0);
  const Fields f = FieldsOf(type);
  const size_t block_bytes = TraitsOf(type).block_bytes;
  const int64_t n_blocks = n_in / kBlock;
  const BlockBundles bundles = Packed32Bundles(type, n_blocks);
  const uint8_t* group = packed + static_cast<size_t>(row / kLanes) * bundles.GroupBytes();
  const int lane = static_cast<int>(row % kLanes);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = out + block_bytes * static_cast<size_t>(b);
    const uint8_t* quant = group + bundles.QuantsOffset(b);
    const uint8_t* side = group + bundles.SideOffset(b);
    for (int d = 0; d < 4; ++d) std::memcpy(block + f.quants + 4 * d, quant + 64 * d + 4 * lane, 4);
    if (HasQh(type)) {
      uint32_t p;
      std::memcpy(&p, quant + 4 * 64 + 4 * lane, 4);
      const uint32_t qh = UnpermuteQh(p);
      std::memcpy(block + f.qh, &qh, 4);
    }
    std::memcpy(block + f.d, side + f.d_bytes * lane, f.d_bytes);
    if (HasMin(type)) std::memcpy(block + f.m, side + 32 + 2 * lane, 2);
  }
}

}  // namespace kvserve
