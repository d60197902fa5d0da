// Q8_0 and Q4_0 matrices (and Q4_K, Q5_K and Q6_K: packed_kquants.h; Q4_1, Q5_0, Q5_1, IQ4_NL and
// MXFP4: packed_blocks32.h; F32, F16 and BF16: packed_floats.h) repacked at load into groups of 16
// rows ("x16" layouts), so that the SIMD kernels read one contiguous stream with the 16 rows side
// by side instead of 16 strided rows and gathered scales. The numbers are the same bytes,
// rearranged: the kernels compute exactly what they compute on the stored layout (kernels.h), bit
// for bit.
//
// Layout of a packed matrix: groups of 16 rows, group g at g * PackedGroupBytes (a multiple of 64).
// Inside a group, for n_blocks = n_in / 32 blocks, the blocks go in pairs, one stream (bundles of
// two, block_bundles.h; PackedBundles): block 2p's quants, block 2p + 1's quants, then the two
// blocks' 16 f16 scales each, lane = row; an odd last block is a pair of its own: its quants, its
// scales, 32 bytes of zeros. A block's quants, PackedQuantBytes of them:
//     Q8_0: 8 dwords d = 0..7, each 64 bytes: bytes 4l .. 4l + 3 are row l's quants 4d .. 4d + 3,
//           XORed with 0x80 (signed to unsigned, offset 128);
//     Q4_0: 4 dwords d = 0..3, each 64 bytes: bytes 4l .. 4l + 3 are row l's nibble bytes
//           4d .. 4d + 3 as stored (low nibbles: elements 4d.., high nibbles: 16 + 4d..).
// The scales sit beside their quants because a decode tile reads memory faster from one stream:
// with all of a group's scales after all its quants (the layout before 2026-12-07) the Q4_0 tile
// read 65-77% of what a plain read of the same bytes reads on a Zen 5 VM, paired 87-99%
// (bench/blocks32_decode_ab.cc; docs/benchmarks.md, "Zen 5").
// Rows past n_out in the last group are zero (quants of value 0, scale 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"
#include "kernels/cpu/block_bundles.h"

namespace kvserve {

constexpr int kPackRows = 16;

// True for the types that have an x16 layout (Q8_0, Q4_0, the K-quants Q4_K/Q5_K/Q6_K, Q4_1,
// Q5_0, Q5_1, IQ4_NL, MXFP4, and F32, F16, BF16).
bool HasPackedLayout(GgmlType type);
// Quant bytes of one block of a 16-row group (Q8_0 and Q4_0 only).
size_t PackedQuantBytes(GgmlType type);

// Where the blocks of a Q8_0 or Q4_0 group are (quant_bytes = PackedQuantBytes: bundles of two
// blocks, block_bundles.h).
constexpr size_t kPackedScaleBytes = 2 * kPackRows;
constexpr BlockBundles PackedBundles(size_t quant_bytes, int64_t n_blocks) {
  static_assert(BlocksPerBundle(4 * 64, kPackedScaleBytes) == 2 &&
                BlocksPerBundle(8 * 64, kPackedScaleBytes) == 2);
  return BlockBundles(quant_bytes, kPackedScaleBytes, n_blocks, 2);
}
// Bytes of one 16-row group of a matrix with n_in columns (rounded up to 64).
size_t PackedGroupBytes(GgmlType type, int64_t n_in);
size_t PackedMatrixBytes(GgmlType type, int64_t n_out, int64_t n_in);

// Packs groups [group_begin, group_end) of the stored matrix `src` (n_out rows, src_row_bytes
// apart) into `dst` (the packed matrix's base; group g goes to dst + g * PackedGroupBytes).
void PackGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst);
// The inverse for one row: writes row `row` of the packed matrix in the stored block layout.
void UnpackRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out);

}  // namespace kvserve
