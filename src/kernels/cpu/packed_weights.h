// Q8_0 and Q4_0 matrices (and Q4_K, Q5_K and Q6_K: packed_kquants.h; Q4_1, Q5_0, Q5_1, IQ4_NL and
// MXFP4: packed_blocks32.h) repacked at load into groups of 16 rows ("x16" layouts), so that the
// SIMD kernels read one contiguous stream with the 16 rows side by side instead of 16 strided rows
// and gathered scales. The numbers are the same bytes, rearranged: the kernels compute exactly what
// they compute on the stored layout (kernels.h), bit for bit.
//
// Layout of a packed matrix: groups of 16 rows, group g at g * PackedGroupBytes (a multiple of 64).
// Inside a group, for n_blocks = n_in / 32 blocks, the blocks go in pairs, one stream: pair p
// (blocks 2p and 2p + 1) at p * PackedPairBytes holds block 2p's quants, block 2p + 1's quants,
// then the two blocks' 16 f16 scales each, lane = row (PackedQuantsOffset, PackedScalesOffset; an
// odd last block is a pair of its own: its quants, its scales, 32 bytes of zeros). A block's
// quants, PackedQuantBytes of them:
//     Q8_0: 8 dwords d = 0..7, each 64 bytes: bytes 4l .. 4l + 3 are row l's quants 4d .. 4d + 3,
//           XORed with 0x80 (signed to unsigned, offset 128);
//     Q4_0: 4 dwords d = 0..3, each 64 bytes: bytes 4l .. 4l + 3 are row l's nibble bytes
//           4d .. 4d + 3 as stored (low nibbles: elements 4d.., high nibbles: 16 + 4d..).
// The scales sit beside their quants because a decode tile reads memory faster from one stream:
// with all of a group's scales after all its quants (the layout before 2026-12-07) the Q4_0 tile
// read 65-77% of what a plain read of the same bytes reads on a Zen 5 VM, paired 93-99%
// (bench/blocks32_decode_ab.cc; docs/benchmarks.md, "Zen 5").
// Rows past n_out in the last group are zero (quants of value 0, scale 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"

namespace kvserve {

constexpr int kPackRows = 16;

// True for the types that have an x16 layout (Q8_0, Q4_0, the K-quants Q4_K/Q5_K/Q6_K and Q4_1,
// Q5_0, Q5_1, IQ4_NL, MXFP4).
bool HasPackedLayout(GgmlType type);
// Quant bytes of one block of a 16-row group (Q8_0 and Q4_0 only).
size_t PackedQuantBytes(GgmlType type);

// Q8_0 and Q4_0 groups (quant_bytes = PackedQuantBytes): a pair of blocks' bytes, and where block
// b's quants and its 16 f16 scales start inside a group.
constexpr size_t kPackedScaleBytes = 2 * kPackRows;
constexpr size_t PackedPairBytes(size_t quant_bytes) {
  return 2 * (quant_bytes + kPackedScaleBytes);
}
constexpr size_t PackedQuantsOffset(size_t quant_bytes, size_t b) {
  return b / 2 * PackedPairBytes(quant_bytes) + b % 2 * quant_bytes;
}
// Of n_blocks blocks: an odd last block is a pair of its own, its quants then its scales (and 32
// bytes of padding), so a group costs no more than the stored rows, up to the 64-byte rounding.
constexpr size_t PackedScalesOffset(size_t quant_bytes, size_t b, size_t n_blocks) {
  const size_t pair = b / 2 * PackedPairBytes(quant_bytes);
  if (b % 2 == 0 && b + 1 == n_blocks) return pair + quant_bytes;
  return pair + 2 * quant_bytes + b % 2 * kPackedScaleBytes;
}
// The bytes from block b's quants to block b + 1's (with the pair's scales after an odd b): the
// part of the group's stream a tile reads with block b, and prefetches ahead.
constexpr size_t PackedStreamBytes(size_t quant_bytes, size_t b) {
  return quant_bytes + b % 2 * 2 * kPackedScaleBytes;
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
