// The x16 layout of F32, F16 and BF16 matrices (packed_weights.h has the quantized types'): 16
// rows side by side, so that a decode tile reads a group as one forward stream. The numbers are the
// stored ones: the kernels compute exactly what they compute on the stored rows, bit for bit.
//
// A group of 16 rows holds kv = ceil(n_in / 16) vectors of each row: vector v of row l (its
// elements 16v .. 16v + 15, zero past n_in) at byte (16 v + l) * 16 * element bytes. So one step of
// the decode tile (one vector of all 16 rows: 512 bytes of F16) is the next piece of the stream.
// Rows past n_out in the last group are zero.
//
// Why: the stored rows, 8 of them side by side in the decode tile, are 8 streams. On a Zen 4 VM (2
// threads) tinyllama-1.1b F16 decoded at 70-80% of the bandwidth probe from the stored rows and at
// 90-94% from this layout (`kvserve bench`, KVSERVE_PACK=0 against 1, alternating), 0.82x
// llama.cpp before and 1.22x after (docs/benchmarks.md, "Zen 4: float matrices as one stream").
// In-process (bench/float_decode_layout_bench.cc) the two tiles are level in the VM's slow
// moments and this one is ahead by up to 15% in its fast ones. The AVX2 tables read the same
// layout (their 8-lane tiles take a 16-element vector in two halves): on that VM with
// KVSERVE_ISA=avx2, tinyllama F16 decoded at 13.7-13.8 t/s from the stored rows and 24.5-25.3
// from the groups (2 rounds, alternating), gpt2 F16 at 150 against 207-211.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/ggml_type.h"

namespace kvserve {

// True for F32, F16 and BF16.
bool HasPackedFloatLayout(GgmlType type);
// Bytes of one 16-row group.
size_t PackedFloatGroupBytes(GgmlType type, int64_t n_in);
void PackFloatGroups(GgmlType type, const uint8_t* src, size_t src_row_bytes, int64_t n_out,
                     int64_t n_in, int64_t group_begin, int64_t group_end, uint8_t* dst);
void UnpackFloatRow(GgmlType type, const uint8_t* packed, int64_t n_in, int64_t row, uint8_t* out);

}  // namespace kvserve
