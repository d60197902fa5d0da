// In-process A/B of the F16 decode tile on two weight layouts (packed_floats.h), both with the
// AVX-512 tile's arithmetic: the stored rows, 8 side by side with the next tile's rows prefetched
// into L2 as one linear stream (float_matmul_avx512.cc's FloatTile<kF16, 1, 8, kL2>, the tile
// before the x16 layout); the x16 layout, 16 rows per group and one forward stream, without
// software prefetch and with its lines prefetched into L2 24 KiB ahead; and a plain read of the
// same bytes. Two threads, each half of the rows; each shape is timed 30 times per variant,
// rotating the order, over enough copies of the matrix (200 MB) that it streams from DRAM;
// medians and bests of weight bytes per second. The shapes are tinyllama-1.1b's.
//
// Not part of the CMake build; compile ad hoc:
//   g++ -std=c++20 -O3 -march=native bench/float_decode_layout_bench.cc -lpthread
//       -o /tmp/float_decode_layout_bench
#include <immintrin.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static inline float HSum(__m512 v) { return _mm512_reduce_add_ps(v); }

// Row layout: 8 rows side by side, next tile's bytes prefetched (L2) as the kernel does.
static void TileRows(const uint8_t* w0, size_t rb, int k, const float* x, float* y) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const uint8_t* next = w0 + 8 * rb;
  for (int kk = 0; kk < k; kk += 16) {
    const uint8_t* a = next + 16 * kk;
    for (int l = 0; l < 256; l += 64) _mm_prefetch((const char*)a + l, _MM_HINT_T1);
    const __m512 xv = _mm512_loadu_ps(x + kk);
    for (int c = 0; c < 8; ++c) {
      __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(w0 + c * rb + 2 * kk)));
      acc[c] = _mm512_fmadd_ps(wv, xv, acc[c]);
    }
  }
  for (int c = 0; c < 8; ++c) y[c] = HSum(acc[c]);
}

// x16: per 16 columns, the 16 rows' 32 bytes one after another (512 B per step).
template <int PF>
static void TileX16(const uint8_t* g, int k, const float* x, float* y) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int kk = 0; kk < k; kk += 16) {
    const uint8_t* s = g + 32 * kk;
    if (PF > 0)
      for (int l = 0; l < 512; l += 64) _mm_prefetch((const char*)s + PF + l, _MM_HINT_T1);
    const __m512 xv = _mm512_loadu_ps(x + kk);
    for (int c = 0; c < 16; ++c) {
      __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s + 32 * c)));
      acc[c] = _mm512_fmadd_ps(wv, xv, acc[c]);
    }
  }
  for (int c = 0; c < 16; ++c) y[c] = HSum(acc[c]);
}

static float PlainRead(const uint8_t* p, size_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a;
  for (size_t i = 0; i < bytes; i += 128) {
    a = _mm512_add_epi32(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi32(b, _mm512_loadu_si512(p + i + 64));
  }
  return (float)_mm512_reduce_add_epi32(_mm512_add_epi32(a, b));
}

struct Barrier {
  std::atomic<int> gen{0}, count{0};
  int n;
  void Wait() {
    int g = gen.load();
    if (count.fetch_add(1) + 1 == n) {
      count = 0;
      gen.fetch_add(1);
    } else {
      while (gen.load() == g) _mm_pause();
    }
  }
};

int main() {
  int shapes[3][2] = {{5632, 2048}, {2048, 5632}, {2048, 2048}};
  const int kCopiesMax = 24, kReps = 30, kThreads = 2;
  for (auto& s : shapes) {
    int n = s[0], k = s[1];
    size_t bytes = (size_t)n * k * 2;
    const int kCopies = std::min<int>(kCopiesMax, 200000000 / bytes + 1);
    std::vector<uint8_t*> cp;
    for (int c = 0; c < kCopies; ++c) {
      auto* p = (uint8_t*)aligned_alloc(64, bytes);
      for (size_t i = 0; i < bytes; i += 2) *(uint16_t*)(p + i) = 0x3c00 ^ (i & 0x3ff);
      cp.push_back(p);
    }
    std::vector<float> x(k, 0.5f), y(n);
    const int kV = 4;
    const char* names[kV] = {"stored rows, L2 next tile", "x16, no prefetch",
                             "x16, L2 24 KiB ahead", "plain read"};
    std::vector<double> t[kV];
    Barrier bar;
    bar.n = kThreads;
    std::atomic<int> which{0}, copy{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    std::atomic<float> sink{0};
    auto work = [&](int ti) {
      const uint8_t* w = cp[copy];
      int groups = n / 16, per = groups / kThreads;
      int g0 = ti * per, g1 = ti == kThreads - 1 ? groups : g0 + per;
      int v = which;
      float acc = 0;
      for (int g = g0; g < g1; ++g) {
        const uint8_t* p = w + (size_t)g * 32 * k;  // 16 rows of k F16
        if (v == 0) {
          TileRows(p, (size_t)k * 2, k, x.data(), y.data() + g * 16);
          TileRows(p + (size_t)16 * k, (size_t)k * 2, k, x.data(), y.data() + g * 16 + 8);
        }
        if (v == 1) TileX16<0>(p, k, x.data(), y.data() + g * 16);
        if (v == 2) TileX16<24576>(p, k, x.data(), y.data() + g * 16);
      }
      if (v == 3) acc += PlainRead(w + (size_t)g0 * 32 * k, (size_t)(g1 - g0) * 32 * k);
      sink = sink + acc;
    };
    th.emplace_back([&] {
      for (;;) {
        bar.Wait();
        if (stop) return;
        work(1);
        bar.Wait();
      }
    });
    for (int r = 0; r < kReps; ++r) {
      for (int v0 = 0; v0 < kV; ++v0) {
        int v = (v0 + r) % kV;
        which = v;
        copy = (copy + 1) % kCopies;
        auto a = std::chrono::steady_clock::now();
        bar.Wait();
        work(0);
        bar.Wait();
        auto b = std::chrono::steady_clock::now();
        t[v].push_back(std::chrono::duration<double>(b - a).count());
      }
    }
    stop = true;
    bar.Wait();
    for (auto& x : th) x.join();
    printf("%dx%d:", n, k);
    for (int v = 0; v < kV; ++v) {
      std::sort(t[v].begin(), t[v].end());
      printf("  %s %.1f (best %.1f)", names[v], bytes / t[v][kReps / 2] / 1e9,
             bytes / t[v][0] / 1e9);
    }
    printf(" GB/s\n");
    for (auto* p : cp) free(p);
  }
}
