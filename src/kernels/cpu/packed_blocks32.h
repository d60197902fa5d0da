// The x16 layouts of Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 matrices (32-element blocks;
// packed_weights.h has Q8_0/Q4_0's, packed_kquants.h the K-quants'): 16 rows side by side, row l in
// lane l, so a SIMD kernel reads a group as one forward stream and its float steps run one lane per
// row. The numbers are the stored ones: the kernels compute exactly what the scalar tiles compute,
// bit for bit.
//
// A 16-row group of n_blocks = n_in / 32 blocks holds them in bundles (block_bundles.h): a few
// blocks' quant parts, then their side parts, as few blocks as fill whole 64-byte lines (Q4_1,
// Q5_1: 1; Q5_0, IQ4_NL: 2; MXFP4: 4), then zero padding to a multiple of 64 bytes. "Dword d" is 64
// bytes: bytes 4l .. 4l + 3 are row l's stored bytes 4d .. 4d + 3 of that array.
//   quant part: dwords 0 .. 3 of quants[16] (256 bytes); Q5_0 and Q5_1 add one dword vector of
//     the lane's qh bits, permuted so that one shift puts each element's bit 4 in place: bit
//     8k + j of lane l's word is qh bit 16h + 4d + k of row l, for j = d + 4h (d, k in 0 .. 3,
//     h in 0 .. 1): the bit of element 4d + k (h = 0) or 16 + 4d + k (h = 1), byte k of dword d.
//   side part: d[16] (f16, lane = row); Q4_1 and Q5_1 then m[16]; MXFP4 e[16] (E8M0 bytes, lane =
//     row: 16 bytes, so a group is as many bytes as its 16 stored rows, up to the padding).
// Rows past n_out in the last group are zero.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"
#include "kernels/cpu/block_bundles.h"

namespace kvserve {

// True for Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4.
bool HasPacked32Layout(GgmlType type);
// Bytes of one block's quant part and side part in a group.
constexpr size_t Packed32QuantBytes(GgmlType type) {
  return type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1 ? 5 * 64 : 4 * 64;
}
constexpr size_t Packed32SideBytes(GgmlType type) {
  return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 ? 64
         : type == GgmlType::kMXFP4                         ? 16
                                                            : 32;
}
// Where a group's blocks are (block_bundles.h); Packed32BundlesOf<T> with the bundle size a
// compile-time constant, for the tiles.
constexpr BlockBundles Packed32Bundles(GgmlType type, int64_t n_blocks) {
  return BlockBundles(Packed32QuantBytes(type), Packed32SideBytes(type), n_blocks,
                      BlocksPerBundle(Packed32QuantBytes(type), Packed32SideBytes(type)));
}
template <GgmlType T>
BlockBundles Packed32BundlesOf(int64_t n_blocks) {
  constexpr int64_t kPerBundle = BlocksPerBundle(Packed32QuantBytes(T), Packed32SideBytes(T));
  return BlockBundles(Packed32QuantBytes(T), Packed32SideBytes(T), n_blocks, kPerBundle);
}
size_t Packed32GroupBytes(GgmlType type, int64_t n_in);
void Pack32Groups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                  int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst);
void Unpack32Row(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out);

}  // namespace kvserve
