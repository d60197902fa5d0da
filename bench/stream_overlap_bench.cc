// How much multiply work one core overlaps with a stream from DRAM: one thread reads a 512 MiB
// buffer, either as one linear stream or laid out as the packed Q4_0 groups are (64 blocks of 256
// bytes of quants, then their 64 x 32 bytes of scales, read side by side), doing `vpdpbusd` work
// per line, with or without the decode tiles' software prefetch (12 KiB ahead into L1; for the
// scales, 48 blocks ahead). Prints GB/s per configuration, medians of 7 passes, two rounds. The
// results are not the tiles' (no real activations): only the rates matter.
//
// Not part of the CMake build:
//   g++ -std=c++20 -O3 -mavx512f -mavx512bw -mavx512vnni -mf16c -Wno-maybe-uninitialized
//       bench/stream_overlap_bench.cc
//       -o /tmp/stream_overlap && /tmp/stream_overlap
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kPrefetchAhead = 12288;
constexpr size_t kQuantBytes = 256, kScaleBytes = 32, kBlocks = 64;
constexpr size_t kGroupBytes = kBlocks * (kQuantBytes + kScaleBytes);

// One linear stream: per 64-byte line one load and `kDots` vpdpbusd (8 independent sums).
template <int kDots, bool kPrefetch>
__attribute__((noinline)) __m512i LinearPass(const uint8_t* p, size_t n, __m512i x) {
  __m512i acc[8];
  for (auto& a : acc) a = _mm512_setzero_si512();
  for (size_t off = 0; off < n; off += 64) {
    if (kPrefetch)
      _mm_prefetch(reinterpret_cast<const char*>(p + off + kPrefetchAhead), _MM_HINT_T0);
    const __m512i v = _mm512_load_si512(p + off);
    if (kDots == 0) acc[0] = _mm512_xor_si512(acc[0], v);
    for (int d = 0; d < kDots; ++d) acc[d % 8] = _mm512_dpbusd_epi32(acc[d % 8], v, x);
  }
  for (int i = 1; i < 8; ++i) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
  return acc[0];
}

// The packed layout: per block four lines of quants (two vpdpbusd each, as the Q4_0 tile does)
// and the block's 32 bytes of scales; kPrefetch as the tile's L1 form (quants and scales).
template <bool kPrefetch>
__attribute__((noinline)) __m512i GroupPass(const uint8_t* p, size_t n, __m512i x) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t g = 0; g + kGroupBytes <= n; g += kGroupBytes) {
    const uint8_t* scales = p + g + kBlocks * kQuantBytes;
    for (size_t b = 0; b < kBlocks; ++b) {
      const uint8_t* quants = p + g + kQuantBytes * b;
      if (kPrefetch) {
        for (size_t line = 0; line < kQuantBytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(quants + kPrefetchAhead + line), _MM_HINT_T0);
        }
        if (b % 2 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(scales + kScaleBytes * (b + 48)), _MM_HINT_T0);
        }
      }
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (size_t line = 0; line < kQuantBytes; line += 64) {
        const __m512i v = _mm512_load_si512(quants + line);
        s0 = _mm512_dpbusd_epi32(s0, v, x);
        s1 = _mm512_dpbusd_epi32(s1, v, x);
      }
      const __m512 dw = _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + kScaleBytes * b)));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dw, acc);
    }
  }
  return _mm512_castps_si512(acc);
}

template <typename Pass>
double GbPerSecond(Pass pass, const uint8_t* buffer, size_t n) {
  const __m512i x = _mm512_set1_epi32(0x01010101);
  std::vector<double> seconds;
  for (int i = 0; i < 7; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const __m512i r = pass(buffer, n, x);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    volatile int sink = _mm512_reduce_add_epi32(r);
    (void)sink;
  }
  std::sort(seconds.begin(), seconds.end());
  return static_cast<double>(n) / seconds[3] / 1e9;
}

}  // namespace

int main() {
  const size_t n = (size_t{512} << 20) / kGroupBytes * kGroupBytes;
  auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(64, n + kPrefetchAhead + 4096));
  std::memset(buffer, 1, n + kPrefetchAhead + 4096);
  for (int round = 1; round <= 2; ++round) {
    std::printf("round %d\n", round);
    std::printf("  linear, bare read            %6.1f GB/s\n",
                GbPerSecond(LinearPass<0, false>, buffer, n));
    std::printf("  linear, 2 dots per line      %6.1f GB/s\n",
                GbPerSecond(LinearPass<2, false>, buffer, n));
    std::printf("  linear, 2 dots + prefetch    %6.1f GB/s\n",
                GbPerSecond(LinearPass<2, true>, buffer, n));
    std::printf("  linear, 8 dots + prefetch    %6.1f GB/s\n",
                GbPerSecond(LinearPass<8, true>, buffer, n));
    std::printf("  groups, no prefetch          %6.1f GB/s\n",
                GbPerSecond(GroupPass<false>, buffer, n));
    std::printf("  groups, the tile's prefetch  %6.1f GB/s\n",
                GbPerSecond(GroupPass<true>, buffer, n));
  }
  std::free(buffer);
  return 0;
}
