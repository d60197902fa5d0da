// In-process A/B of the two ways the AVX2 F16 decode tile can read its weights: 8 weight rows side
// by side (8 short streams, what kernels_avx2.cc's FloatTile<kF16, 1, 8> reads), with and without a
// software prefetch of the next tile's rows as one linear stream (2 lines per 8 weights of each
// row). Two threads take chunks of 64 tiles as the engine's decode matmuls do; each shape is timed
// 40 times per variant, alternating, over 4 copies of the matrix so it streams from memory, and
// the median and best bytes per second are printed. Both variants live in one process, so slow
// drifts of a shared VM's bandwidth hit them alike (engine-level runs on such a VM spread 40%).
// The shapes are gpt2-124m's decode matmuls (n_out x n_in).
//
// Not part of the CMake build; compile ad hoc (one command):
//   g++ -O2 -mavx2 -mfma -mf16c bench/float_decode_prefetch_bench.cc -lpthread
//       -o /tmp/float_decode_prefetch_bench
#include <immintrin.h>
#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
static inline float HSum(__m256 v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
template <bool PF>
void Tile(const uint8_t* w0, size_t rb, int k, const float* x, float* y) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const uint8_t* next = w0 + 8 * rb;
  for (int kk = 0; kk < k; kk += 8) {
    if (PF) {
      const uint8_t* a = next + 16 * kk;
      _mm_prefetch((const char*)a, _MM_HINT_T0);
      _mm_prefetch((const char*)a + 64, _MM_HINT_T0);
    }
    const __m256 xv = _mm256_loadu_ps(x + kk);
    for (int c = 0; c < 8; ++c)
      acc[c] = _mm256_fmadd_ps(
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(w0 + c * rb + 2 * kk))), xv, acc[c]);
  }
  for (int c = 0; c < 8; ++c) y[c] = HSum(acc[c]);
}
int main() {
  const int shapes[][2] = {{50257, 768}, {3072, 768}, {768, 3072}, {2304, 768}};
  size_t maxb = 0;
  for (auto& s : shapes) maxb = std::max(maxb, (size_t)s[0] * s[1] * 2);
  // several copies so each run streams from memory
  const int copies = 4;
  std::vector<uint8_t*> bufs;
  for (int c = 0; c < copies; ++c) {
    auto* b = (uint8_t*)aligned_alloc(2 << 20, (maxb + (4 << 20)) & ~size_t((2 << 20) - 1));
    madvise(b, maxb, MADV_HUGEPAGE);
    for (size_t i = 0; i < maxb; i += 2) ((uint16_t*)b)[i / 2] = 0x3c00 ^ (i & 0x3ff);
    bufs.push_back(b);
  }
  std::vector<float> x(4096, 0.5f), y(60000);
  for (auto& s : shapes) {
    int n = s[0] / 8 * 8, k = s[1];
    size_t rb = 2 * k;
    std::vector<double> t[2];
    int copy = 0;
    for (int rep = 0; rep < 40; ++rep)
      for (int v = 0; v < 2; ++v) {
        const uint8_t* w = bufs[copy++ % copies];
        std::atomic<int> next{0};
        auto work = [&] {
          for (;;) {
            int c = next.fetch_add(64);
            if (c >= n / 8) break;
            for (int g = c; g < std::min(c + 64, n / 8); ++g)
              (v ? Tile<true> : Tile<false>)(w + (size_t)g * 8 * rb, rb, k, x.data(),
                                             y.data() + g * 8);
          }
        };
        auto t0 = std::chrono::steady_clock::now();
        std::thread th(work);
        work();
        th.join();
        t[v].push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    for (int v = 0; v < 2; ++v) {
      std::sort(t[v].begin(), t[v].end());
      printf("%5dx%-5d %s median %.1f GB/s best %.1f\n", n, k, v ? "prefetch" : "plain   ",
             n * rb / t[v][t[v].size() / 2] / 1e9, n * rb / t[v][0] / 1e9);
    }
  }
}
