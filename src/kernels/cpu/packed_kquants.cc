#include "kernels/cpu/packed_kquants.h"

#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/ggml_blocks.h"

namespace kvserve {

namespace {

constexpr int kLanes = 16;
constexpr int kSuper = 256;

static_assert(kKSideBytes >= kQ4KSidePart && kKSideBytes >= kQ6KSidePart && kKSideBytes % 64 == 0);
static_assert(kQ4KStride == kKSideBytes + kQ4KQuantPart &&
              kQ5KStride == kKSideBytes + kQ5KQuantPart &&
              kQ6KStride == kKSideBytes + kQ6KQuantPart);
size_t Stride(GgmlType type) {
  return type == GgmlType::kQ6_K ? kQ6KStride : type == GgmlType::kQ5_K ? kQ5KStride : kQ4KStride;
}
size_t StoredBlock(GgmlType type) { return TraitsOf(type).block_bytes; }

// Copies `n_dwords` dwords of row `lane` between a stored byte array and a packed dword array.
void PackDwords(const uint8_t* stored, int n_dwords, int lane, uint8_t* packed) {
  for (int d = 0; d < n_dwords; ++d) std::memcpy(packed + 64 * d + 4 * lane, stored + 4 * d, 4);
}
void UnpackDwords(const uint8_t* packed, int n_dwords, int lane, uint8_t* stored) {
  for (int d = 0; d < n_dwords; ++d) std::memcpy(stored + 4 * d, packed + 64 * d + 4 * lane, 4);
}

// The 12 stored scale bytes of a Q4_K super-block from its decoded scales and mins: the inverse of
// ScaleMinK4 (96 bits either way, so the bytes come back exactly).
void EncodeScaleMinK4(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
  }
}

// Q4_K and Q5_K (Block: BlockQ4_K or BlockQ5_K; Q5_K adds qh after the quants).
template <typename Block>
void PackK4(const uint8_t* block, int lane, uint8_t* quant, uint8_t* side) {
  PackDwords(block + offsetof(Block, quants), 32, lane, quant);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    PackDwords(block + offsetof(BlockQ5_K, qh), 8, lane, quant + kQ5KQh);
  }
  for (int s = 0; s < 8; ++s) {
    int8_t sc, mn;
    ScaleMinK4(block + offsetof(Block, scales), s, &sc, &mn);
    side[kQ4KScales + 16 * s + lane] = static_cast<uint8_t>(sc);
    side[kQ4KMins + 16 * s + lane] = static_cast<uint8_t>(mn);
  }
  std::memcpy(side + kQ4KD + 2 * lane, block + offsetof(Block, d), 2);
  std::memcpy(side + kQ4KDmin + 2 * lane, block + offsetof(Block, dmin), 2);
}

template <typename Block>
void UnpackK4(const uint8_t* quant, const uint8_t* side, int lane, uint8_t* block) {
  UnpackDwords(quant, 32, lane, block + offsetof(Block, quants));
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    UnpackDwords(quant + kQ5KQh, 8, lane, block + offsetof(BlockQ5_K, qh));
  }
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = side[kQ4KScales + 16 * s + lane];
    mn[s] = side[kQ4KMins + 16 * s + lane];
  }
  EncodeScaleMinK4(sc, mn, block + offsetof(Block, scales));
  std::memcpy(block + offsetof(Block, d), side + kQ4KD + 2 * lane, 2);
  std::memcpy(block + offsetof(Block, dmin), side + kQ4KDmin + 2 * lane, 2);
}

// The vector of a Q6_K quant part that holds ql dword d (ql_dword) or qh dword d (the kernel's
// reading order, packed_kquants.h).
int Q6KQlVector(int d) { return 3 * (8 * (d / 16) + d % 8) + (d % 16) / 8; }
int Q6KQhVector(int d) { return 3 * d + 2; }

void PackQ6K(const uint8_t* block, int lane, uint8_t* quant, uint8_t* side) {
  const uint8_t* ql = block + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = block + offsetof(BlockQ6_K, qh);
  for (int d = 0; d < 32; ++d) std::memcpy(quant + 64 * Q6KQlVector(d) + 4 * lane, ql + 4 * d, 4);
  for (int d = 0; d < 16; ++d) std::memcpy(quant + 64 * Q6KQhVector(d) + 4 * lane, qh + 4 * d, 4);
  for (int s = 0; s < 16; ++s)
    side[kQ6KScales + 16 * s + lane] = block[offsetof(BlockQ6_K, scales) + s];
  std::memcpy(side + kQ6KD + 2 * lane, block + offsetof(BlockQ6_K, d), 2);
}

void UnpackQ6K(const uint8_t* quant, const uint8_t* side, int lane, uint8_t* block) {
  uint8_t* ql = block + offsetof(BlockQ6_K, ql);
  uint8_t* qh = block + offsetof(BlockQ6_K, qh);
  for (int d = 0; d < 32; ++d) std::memcpy(ql + 4 * d, quant + 64 * Q6KQlVector(d) + 4 * lane, 4);
  for (int d = 0; d < 16; ++d) std::memcpy(qh + 4 * d, quant + 64 * Q6KQhVector(d) + 4 * lane, 4);
  for (int s = 0; s < 16; ++s)
    block[offsetof(BlockQ6_K, scales) + s] = side[kQ6KScales + 16 * s + lane];
  std::memcpy(block + offsetof(BlockQ6_K, d), side + kQ6KD + 2 * lane, 2);
}

}  // namespace

bool HasPackedKLayout(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
}

size_t PackedKGroupBytes(GgmlType type, int64_t n_in) {
  return static_cast<size_t>(n_in / kSuper) * Stride(type);
}

void PackKGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                 int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst) {
  assert(HasPackedKLayout(type) && n_in % kSuper == 0);
  const int64_t n_sb = n_in / kSuper;
  const size_t group_bytes = PackedKGroupBytes(type, n_in);
  for (int64_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(group, 0, group_bytes);
    for (int lane = 0; lane < kLanes; ++lane) {
      const int64_t row = g * kLanes + lane;
      if (row >= n_out) continue;
      for (int64_t b = 0; b < n_sb; ++b) {
        const uint8_t* block = src + src_row_bytes * static_cast<size_t>(row) +
                               StoredBlock(type) * static_cast<size_t>(b);
        uint8_t* side = group + Stride(type) * static_cast<size_t>(b);
        uint8_t* quant = side + kKSideBytes;
        if (type == GgmlType::kQ6_K) {
          PackQ6K(block, lane, quant, side);
        } else if (type == GgmlType::kQ5_K) {
          PackK4<BlockQ5_K>(block, lane, quant, side);
        } else {
          PackK4<BlockQ4_K>(block, lane, quant, side);
        }
      }
    }
  }
}

void UnpackKRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out) {
  assert(HasPackedKLayout(type) && n_in % kSuper == 0);
  const int64_t n_sb = n_in / kSuper;
  const uint8_t* group = packed + static_cast<size_t>(row / kLanes) * PackedKGroupBytes(type, n_in);
  const int lane = static_cast<int>(row % kLanes);
  for (int64_t b = 0; b < n_sb; ++b) {
    uint8_t* block = out + StoredBlock(type) * static_cast<size_t>(b);
    const uint8_t* side = group + Stride(type) * static_cast<size_t>(b);
    const uint8_t* quant = side + kKSideBytes;
    if (type == GgmlType::kQ6_K) {
      UnpackQ6K(quant, side, lane, block);
    } else if (type == GgmlType::kQ5_K) {
      UnpackK4<BlockQ5_K>(quant, side, lane, block);
    } else {
      UnpackK4<BlockQ4_K>(quant, side, lane, block);
    }
  }
}

}  // namespace kvserve
