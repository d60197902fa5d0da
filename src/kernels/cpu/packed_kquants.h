// The x16 layouts of Q4_K, Q5_K and Q6_K matrices (packed_weights.h has the Q8_0/Q4_0 ones): 16
// rows side by side, so a SIMD kernel reads each super-block of 16 rows as one contiguous stream
// with row l in lane l, and the sub-block scales come already decoded. The numbers are the stored
// ones: the kernels compute exactly what the scalar tiles compute on the stored layout, bit for
// bit.
//
// A 16-row group holds n_sb = n_in / 256 super-blocks, super-block b at b * stride: its side part,
// zero-padded to kKSideBytes (320: 5 cache lines), then its quant part, which fills the rest of
// the stride (a multiple of 64 bytes), so that a kernel reads the group as one forward stream.
// The side part comes first because a super-block's scales are read as its first quants are:
// with them at its end, the decode tiles jumped 32-48 lines ahead and back in every super-block,
// and on a Zen 3 VM the hardware prefetchers then kept fewer lines in flight (Q6_K at m = 1 read
// 15% faster side first; docs/benchmarks.md). "Dword d" is 64 bytes: bytes 4l .. 4l + 3 are
// row l's stored bytes 4d .. 4d + 3 of that array, as stored.
//   Q4_K quant part (2048 bytes): dwords 0 .. 31 of quants[128].
//   Q5_K quant part (2560 bytes): Q4_K's, then dwords 0 .. 7 of qh[32].
//   Q4_K and Q5_K side part (320 bytes): scales[8][16] (uint8, the 6-bit sub-block scale of
//   sub-block s of
//     lane l at 16s + l), mins[8][16] (likewise), d[16] and dmin[16] (f16, lane = row).
//   Q6_K quant part (3072 bytes): 48 dword vectors in the kernel's reading order: for i = 0 .. 15
//     (half n = i / 8, i % 8 within it), vector 3i is ql dword 16n + i % 8, vector 3i + 1 is ql
//     dword 16n + 8 + i % 8, vector 3i + 2 is qh dword i.
//   Q6_K side part (288 bytes): scales[16][16] (int8, sub-block s of lane l at 16s + l), d[16].
// Rows past n_out in the last group are zero.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"

namespace kvserve {

constexpr size_t kKSideBytes = 320;  // the side part of every type, padded; the quant part follows
constexpr size_t kQ4KQuantPart = 2048;
constexpr size_t kQ4KSidePart = 320;
constexpr size_t kQ4KScales = 0, kQ4KMins = 128, kQ4KD = 256, kQ4KDmin = 288;  // in the side part
constexpr size_t kQ4KStride = 2368;
constexpr size_t kQ5KQh = 2048;  // in the quant part
constexpr size_t kQ5KQuantPart = 2560;
constexpr size_t kQ5KStride = 2880;
constexpr size_t kQ6KQuantPart = 3072;
constexpr size_t kQ6KSidePart = 288;           // then 32 bytes of zeros
constexpr size_t kQ6KScales = 0, kQ6KD = 256;  // in the side part
constexpr size_t kQ6KStride = 3392;

// True for Q4_K, Q5_K and Q6_K.
bool HasPackedKLayout(GgmlType type);
// Bytes of one 16-row group of such a matrix of n_in columns.
size_t PackedKGroupBytes(GgmlType type, int64_t n_in);
// Packs groups [group_begin, group_end) of the stored matrix (rows src_row_bytes apart).
void PackKGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                 int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst);
// Writes row `row` of the packed matrix back in the stored block layout, byte for byte.
void UnpackKRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out);

}  // namespace kvserve
