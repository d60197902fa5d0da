// In-process A/B of up to four versions of the AVX2 or AVX-512 K-quant x16 tile at decode (m = 1),
// the way the engine runs it: the engine's ThreadPool (2 threads), ParallelOwnedChunks over 16-row
// groups, tinyllama's shapes, and enough copies of each matrix (256 MB) that every call reads from
// DRAM. The versions alternate call by call, so a drift of the machine's bandwidth (seen at 40%
// from one engine run to the next on a shared VM) hits them alike; medians of 30 rounds. Checks
// that every version gives the first one's bits. SMALL=1 runs one 256-row matrix that stays in L2
// instead (the tiles' compute rate).
//
// Not part of the CMake build. Each version is a copy of the header compiled as its own object
// (versions of one packed layout: this program packs with the current PackGroups, so a header from
// before the side part came first, 2026-12-04, gives other bits and the run stops):
//   git show HEAD:src/kernels/cpu/kquant_x16_avx2.h > /tmp/kqab_a.h
//   cp src/kernels/cpu/kquant_x16_avx2.h /tmp/kqab_b.h
//   for v in A:a B:b; do g++ -std=c++20 -O2 -mavx2 -mfma -mf16c -Isrc -c
//       bench/kquant_decode_variant.cc -DKQAB_NAME=Run${v%:*}
//       -DKQAB_HEADER="\"/tmp/kqab_${v#*:}.h\"" -o /tmp/kqab_${v#*:}.o; done
//   g++ -std=c++20 -O2 -Isrc -I. bench/kquant_decode_ab.cc /tmp/kqab_a.o /tmp/kqab_b.o
//       -DKQAB_VARIANTS=2 build/libkvserve_{kernels,kv,io,util}.a -lpthread -o /tmp/kqab
//   /tmp/kqab
// AVX-512 versions: copies of src/kernels/cpu/kquant_x16_avx512.cc through
// bench/kquant_decode_variant_avx512.cc, each in a namespace of its own, with the build's flags:
//   for v in A:a B:b; do g++ -std=c++20 -O3 -DNDEBUG -mavx512f -mavx512bw -mavx512vl -mavx512dq
//       -mavx512vnni -mavx512bf16 -mavx2 -mfma -mf16c -Isrc -c
//       bench/kquant_decode_variant_avx512.cc -DKQAB_NAME=Run${v%:*} -DKQAB_NS=avx512_${v#*:}
//       -DKQAB_SOURCE="\"/tmp/kqab_${v#*:}.cc\"" -o /tmp/kqab_${v#*:}.o; done
// then link as above.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "bench/decode_ab_problem.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

#ifndef KQAB_VARIANTS
#define KQAB_VARIANTS 2
#endif

namespace kvserve {
void RunA(bool q6, const MatmulTile& t);
void RunB(bool q6, const MatmulTile& t);
#if KQAB_VARIANTS > 2
void RunC(bool q6, const MatmulTile& t);
#endif
#if KQAB_VARIANTS > 3
void RunD(bool q6, const MatmulTile& t);
#endif
}  // namespace kvserve

namespace {

using kvserve::GgmlType;
using Variant = void (*)(bool, const kvserve::MatmulTile&);

}  // namespace

int main() {
  const std::vector<Variant> variants = {
    kvserve::RunA,
    kvserve::RunB,
#if KQAB_VARIANTS > 2
    kvserve::RunC,
#endif
#if KQAB_VARIANTS > 3
    kvserve::RunD,
#endif
  };
  const bool small = std::getenv("SMALL") != nullptr;
  const std::vector<std::pair<int, int>> shapes =
      small ? std::vector<std::pair<int, int>>{{256, 2048}}
            : std::vector<std::pair<int, int>>{{2048, 2048}, {5632, 2048}, {2048, 5632}};
  kvserve::ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (auto [n, k] : shapes) {
      const size_t bytes = kvserve::PackedGroupBytes(type, k) * (n / 16);
      const int copies = small ? 1 : std::max<int>(4, static_cast<int>(256e6 / bytes));
      const kvserve::bench::DecodeProblem p(type, GgmlType::kQ8_K, n, k, copies);
      const int calls = small ? 200 : copies;
      std::vector<std::vector<double>> seconds(variants.size());
      std::vector<float> y(n), first(n);
      int next_copy = 0;
      for (int round = 0; round < 30; ++round) {
        for (size_t v = 0; v < variants.size(); ++v) {
          const bool q6 = type == GgmlType::kQ6_K;
          seconds[v].push_back(kvserve::bench::TimeDecodeMatmul(
              pool, [&](const kvserve::MatmulTile& t) { variants[v](q6, t); }, p, calls, next_copy,
              y));
          if (v == 0) first = y;
          if (v > 0 && std::memcmp(y.data(), first.data(), sizeof(float) * n) != 0) {
            std::printf("variant %c gives other bits than A\n", static_cast<char>('A' + v));
            return 1;
          }
        }
      }
      for (size_t v = 0; v < variants.size(); ++v) {
        std::sort(seconds[v].begin(), seconds[v].end());
        std::printf("%s %5dx%-5d %c  median %5.1f GB/s (%7.1f us)  best %5.1f GB/s\n",
                    kvserve::GgmlTypeName(type), n, k, static_cast<char>('A' + v),
                    p.bytes() / seconds[v][seconds[v].size() / 2] / 1e9,
                    seconds[v][seconds[v].size() / 2] * 1e6, p.bytes() / seconds[v][0] / 1e9);
      }
    }
  }
}
