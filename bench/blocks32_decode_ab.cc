// In-process A/B of up to four versions of the AVX-512 Q4_0 / Q8_0 x16 tiles at decode (m = 1),
// the way the engine runs them: the engine's ThreadPool (THREADS, default 2),
// ParallelOwnedChunks over 16-row groups, tinyllama's shapes, and enough copies of each matrix
// (256 MB) that every call reads from DRAM. The versions alternate call by call, so a drift of the
// machine's bandwidth hits them alike; medians of 30 rounds. Checks that every version gives the
// first one's bits. SHAPES=576x576,1536x576 times other shapes (n_out x n_in). A row "read" is a
// plain read of the same bytes (XOR-folded 64-byte loads, the same ParallelOwnedChunks): the rate
// this access pattern could reach; the last, "halves", the same read as the bandwidth probe cuts it
// (cpu_probe.cc: one contiguous half per thread, no pieces), so read against halves is what the
// owned-piece schedule costs. TYPE=q8_0 runs Q8_0 instead of Q4_0. SMALL=1 runs one 256-row matrix
// that stays in L2 instead (the tiles' compute rate).
//
// Not part of the CMake build. Each version is a copy of quant_matmul_avx512.cc compiled as its
// own object with its exported names renamed (-D), e.g. for the committed version and the working
// copy:
//   git show HEAD:src/kernels/cpu/quant_matmul_avx512.cc > /tmp/b32ab_a.cc
//   cp src/kernels/cpu/quant_matmul_avx512.cc /tmp/b32ab_b.cc
//   F="-O3 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mavx2 -mfma
//   -mf16c" for v in A:a B:b; do g++ -std=c++20 $F -Isrc -c
//       /tmp/b32ab_${v#*:}.cc -DMatmulQ8_0=${v%:*}Q8_0 -DMatmulQ4_0=${v%:*}Q4_0
//       -DMatmulQ8_0x16=${v%:*}Q8_0x16 -DMatmulQ4_0x16=${v%:*}Q4_0x16
//       -DMatmulQ8_0x16L2=${v%:*}Q8_0x16L2 -DMatmulQ4_0x16L2=${v%:*}Q4_0x16L2
//       -o /tmp/b32ab_${v#*:}.o; done
// (The versions run their x16 tiles, the L1-prefetch forms; to time an L2 form, rename it to the
// x16 name in that version's copy. $F is the build's own list for the AVX-512 table: at -O2 GCC
// keeps the Q8_0 tile's unpacked quants on the stack, which the shipped -O3 code does not.)
//   g++ -std=c++20 -O2 -mavx2 -Isrc -I. bench/blocks32_decode_ab.cc /tmp/b32ab_{a,b}.o
//       -DB32AB_VARIANTS=2 build/libkvserve_{kernels,kv,io,util}.a -lpthread -o /tmp/b32ab
//   /tmp/b32ab
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/decode_ab_problem.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

#ifndef B32AB_VARIANTS
#define B32AB_VARIANTS 2
#endif

namespace kvserve::avx512 {
void AQ4_0x16(const MatmulTile& t);
void AQ8_0x16(const MatmulTile& t);
void BQ4_0x16(const MatmulTile& t);
void BQ8_0x16(const MatmulTile& t);
#if B32AB_VARIANTS > 2
void CQ4_0x16(const MatmulTile& t);
void CQ8_0x16(const MatmulTile& t);
#endif
#if B32AB_VARIANTS > 3
void DQ4_0x16(const MatmulTile& t);
void DQ8_0x16(const MatmulTile& t);
#endif
}  // namespace kvserve::avx512

namespace {

using kvserve::GgmlType;
using Variant = void (*)(const kvserve::MatmulTile&);

// The "read" row: every byte of the tile's groups loaded once, folded so that nothing is dropped.
__attribute__((target("avx512f"))) void ReadTile(const kvserve::MatmulTile& t) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += 16) {
    const uint8_t* g = t.w + static_cast<size_t>(j0 / 16) * t.w_row_bytes;
    for (size_t o = 0; o < t.w_row_bytes; o += 128) {
      a = _mm512_xor_si512(a, _mm512_load_si512(g + o));
      b = _mm512_xor_si512(b, _mm512_load_si512(g + o + 64));
    }
  }
  t.y[t.n_begin] = static_cast<float>(_mm512_reduce_add_epi32(_mm512_xor_si512(a, b)));
}

// Seconds per matmul's bytes read as the bandwidth probe reads (cpu_probe.cc): each thread one
// contiguous half, no pieces; the "halves" row. Copies in turn, as TimeDecodeMatmul.
double TimeHalvesRead(kvserve::ThreadPool& pool, const kvserve::bench::DecodeProblem& p, int calls,
                      int& next_copy, std::vector<float>& y) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int call = 0; call < calls; ++call) {
    const uint8_t* w = p.copies[next_copy++ % p.copies.size()];
    pool.Run([&](int thread) {
      const int64_t g0 = p.groups() * thread / pool.size();
      const int64_t g1 = p.groups() * (thread + 1) / pool.size();
      ReadTile({.w = w,
                .w_row_bytes = p.group_bytes,
                .n_begin = static_cast<int>(g0 * 16),
                .n_end = static_cast<int>(g1 * 16),
                .y = y.data()});
    });
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

// "576x576,1536x576": n_out x n_in per shape (n_out a multiple of 16, n_in of 32).
std::vector<std::pair<int, int>> ParseShapes(const char* list) {
  std::vector<std::pair<int, int>> shapes;
  int n = 0, k = 0, used = 0;
  while (std::sscanf(list, "%dx%d%n", &n, &k, &used) == 2) {
    shapes.emplace_back(n, k);
    list += used;
    if (*list != ',') break;
    ++list;
  }
  return shapes;
}

}  // namespace

int main() {
  namespace k5 = kvserve::avx512;
  const bool q8 = std::getenv("TYPE") != nullptr && std::string(std::getenv("TYPE")) == "q8_0";
  std::vector<Variant> variants = {
    q8 ? k5::AQ8_0x16 : k5::AQ4_0x16,
    q8 ? k5::BQ8_0x16 : k5::BQ4_0x16,
#if B32AB_VARIANTS > 2
    q8 ? k5::CQ8_0x16 : k5::CQ4_0x16,
#endif
#if B32AB_VARIANTS > 3
    q8 ? k5::DQ8_0x16 : k5::DQ4_0x16,
#endif
  };
  const size_t n_kernels = variants.size();
  variants.push_back(ReadTile);
  const int threads = std::getenv("THREADS") != nullptr ? std::atoi(std::getenv("THREADS")) : 2;
  const bool small = std::getenv("SMALL") != nullptr;
  std::vector<std::pair<int, int>> shapes =
      small ? std::vector<std::pair<int, int>>{{256, 2048}}
            : std::vector<std::pair<int, int>>{{2048, 2048}, {5632, 2048}, {2048, 5632}};
  if (const char* list = std::getenv("SHAPES"); list != nullptr && !small)
    shapes = ParseShapes(list);
  const GgmlType type = q8 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
  kvserve::ThreadPool pool(threads);
  for (auto [n, k] : shapes) {
    const size_t bytes = kvserve::PackedGroupBytes(type, k) * (n / 16);
    const int copies = small ? 1 : std::max<int>(4, static_cast<int>(256e6 / bytes));
    const kvserve::bench::DecodeProblem p(type, GgmlType::kQ8_0, n, k, copies);
    std::vector<std::vector<double>> seconds(variants.size() + 1);
    std::vector<float> y(n), first(n);
    int next_copy = 0;
    for (int round = 0; round < 30; ++round) {
      for (size_t v = 0; v < variants.size(); ++v) {
        seconds[v].push_back(kvserve::bench::TimeDecodeMatmul(pool, variants[v], p,
                                                              small ? 200 : copies, next_copy, y));
        if (v == 0) first = y;
        if (v > 0 && v < n_kernels && std::memcmp(y.data(), first.data(), sizeof(float) * n) != 0) {
          std::printf("variant %c gives other bits than A\n", static_cast<char>('A' + v));
          return 1;
        }
      }
      seconds.back().push_back(TimeHalvesRead(pool, p, small ? 200 : copies, next_copy, y));
    }
    for (size_t v = 0; v < seconds.size(); ++v) {
      std::sort(seconds[v].begin(), seconds[v].end());
      const double median = seconds[v][seconds[v].size() / 2];
      std::printf("%s %5dx%-5d %-4s median %5.1f GB/s (%7.1f us)  best %5.1f GB/s\n",
                  kvserve::GgmlTypeName(type), n, k,
                  v < n_kernels         ? std::string(1, static_cast<char>('A' + v)).c_str()
                  : v < variants.size() ? "read"
                                        : "halves",
                  p.bytes() / median / 1e9, median * 1e6, p.bytes() / seconds[v][0] / 1e9);
    }
  }
}
