// Software prefetch of the packed weight streams: the 32-element tiles (quant_matmul_avx512.cc,
// quant_tiles_avx2.h, blocks32_x16_*) and the K-quant super-blocks' side data
// (kquant_x16_avx512.cc, kquant_x16_avx2.h). In an anonymous namespace: each translation unit
// gets its own copy, compiled for its own instruction set.
//
// The hardware prefetcher alone streamed the packed groups slowly: without these, decode of a
// tinyllama Q8_0 ran at 26.8 instead of 34.5 tokens/s, 16 streams at 97 instead of 183 (2 threads,
// AVX-512; when a group still kept its blocks' quants in one array and their scales in another).
// The 32-element groups are one stream now (packed_weights.h, block_bundles.h): a tile prefetches
// the part of it it reads with each block, kPrefetchAheadBytes<L> ahead (PrefetchLinesAhead).
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace kvserve {
namespace {

// Bytes of quants ahead of the block being read that are prefetched into L1.
constexpr size_t kBlockPrefetchAhead = 12288;

// Where a decode tile's software prefetches put the lines. kL1: _MM_HINT_T0, kBlockPrefetchAhead
// ahead (tuned on Intel and Zen 3, where it made a tinyllama Q8_0 decode 29% faster than the
// hardware prefetcher alone). kL2: _MM_HINT_T1, twice as far. On a Zen 4 VM the L1 prefetches made
// the Q4_0 and Q8_0 decode tiles slower than no prefetch at all (2 threads, tiles streaming from
// DRAM: 25.7-29.4 GB/s against 28.1-32.5), where L2 prefetches 24 KiB ahead read 34.0-39.0 GB/s
// (bench/blocks32_decode_ab.cc, 2026-12-05). Which level is faster is a property of the CPU, so
// the tables hold both forms of a decode tile and the CPU backend times them
// (decode_tile_chooser.h). Prefetches change no bits.
enum class PrefetchLevel { kL1, kL2 };
template <PrefetchLevel L>
constexpr size_t kPrefetchAheadBytes =
    L == PrefetchLevel::kL1 ? kBlockPrefetchAhead : 2 * kBlockPrefetchAhead;
template <PrefetchLevel L>
constexpr auto kPrefetchHint = L == PrefetchLevel::kL1 ? _MM_HINT_T0 : _MM_HINT_T1;

// Prefetches into L1 the first `bytes` of a piece of weights about to be read, at most
// kBlockPrefetchAhead: the tiles' own prefetches run that far ahead of the block being read, so
// without this the start of every piece (each thread's new stream, at every matmul) came from
// memory on demand. That matters where matrices are small: on a Zen 5 VM (2 threads, old binary
// against new, the order swapped every round: the second of a pair ran faster either way)
// SmolLM2-135M Q4_1 decoded 434 -> 465 t/s (medians of 6 rounds, ahead in 5), its 4-token steps
// 1313 -> 1377 (4 of 4) and 2-token ones 792 -> 808 (3 of 4); Gemma 3 270M (whose 170 MB output
// matrix dominates) and tinyllama's 2-13 MB matrices: level. Unpacked (row-layout) matrices were
// tried too: no effect beyond the order's.
inline void PrefetchPieceStart(const uint8_t* start, size_t bytes) {
  const size_t lead = bytes < kBlockPrefetchAhead ? bytes : kBlockPrefetchAhead;
  for (size_t line = 0; line < lead; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(start + line), _MM_HINT_T0);
  }
}

// K-quant chunks of at most this many activation rows also prefetch each super-block's scales and
// minimums (and Q5_K's high bits), which the sub-blocks' prefetches of the quants they read do not
// cover, so that those lines no longer come from memory on demand (single-thread Q4_K tile at
// m = 1, from memory: 197 → 168 cycles per row-super-block; Q5_K 342 → 218). Larger chunks run
// long enough per super-block for the hardware prefetcher, and the extra lines in L1 cost them
// (Q4_K m = 16: 63 → 69 when every chunk prefetched them).
constexpr int kSidePrefetchRows = 4;

// Prefetches the lines of the `bytes` at `part`, kPrefetchAheadBytes<L> further on (L1:
// kBlockPrefetchAhead). Also the whole prefetch of a tile that reads one stream (the Q8_0 and Q4_0
// groups, whose scales sit beside their quants): the part it reads next, that far ahead.
template <PrefetchLevel L = PrefetchLevel::kL1>
inline void PrefetchLinesAhead(const uint8_t* part, size_t bytes) {
  for (size_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(part + line + kPrefetchAheadBytes<L>),
                 kPrefetchHint<L>);
  }
}

}  // namespace
}  // namespace kvserve
