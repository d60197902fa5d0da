// In-process A/B of up to four versions of the AVX-512 float-weight tiles (F32, F16, BF16 weights,
// stored rows) at prefill: one thread, m activation rows, the matrix shapes of tinyllama-1.1b and
// gpt2-124m. The versions alternate call by call, each round starting with the next one, so a
// drift of the machine's speed (one engine run 20% off the next on a shared VM, and the second of
// two back-to-back runs often the faster) hits them alike; prints the median GFLOP/s (2 m n k per
// call) of each and stops if a version gives other bits than A.
//
// Not part of the CMake build. Each version is a copy of float_matmul_avx512.cc compiled through
// bench/float_prefill_variant_avx512.cc in a namespace of its own:
//   git show HEAD:src/kernels/cpu/float_matmul_avx512.cc > /tmp/fpab_a.cc
//   cp src/kernels/cpu/float_matmul_avx512.cc /tmp/fpab_b.cc
//   for v in A:a B:b; do g++ -std=c++20 -O3 -DNDEBUG -mavx512f -mavx512bw -mavx512vl -mavx512dq
//       -mavx512vnni -mavx512bf16 -mavx2 -mfma -mf16c -Isrc -c
//       bench/float_prefill_variant_avx512.cc -DFPAB_NAME=Run${v%:*} -DFPAB_NS=avx512_${v#*:}
//       -DFPAB_SOURCE="\"/tmp/fpab_${v#*:}.cc\"" -o /tmp/fpab_${v#*:}.o; done
//   g++ -std=c++20 -O2 -Isrc bench/float_prefill_ab.cc /tmp/fpab_a.o /tmp/fpab_b.o
//       build/libkvserve_{kernels,kv,io,util}.a -lpthread -o /tmp/fpab
//   /tmp/fpab [F32|F16|BF16 [m [rounds]]]     (default: F16 128 15)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"

// The versions linked in: RunA and RunB always, RunC and RunD where given (weak: null otherwise).
namespace kvserve {
void RunA(GgmlType type, const MatmulTile& t);
void RunB(GgmlType type, const MatmulTile& t);
__attribute__((weak)) void RunC(GgmlType type, const MatmulTile& t);
__attribute__((weak)) void RunD(GgmlType type, const MatmulTile& t);
}  // namespace kvserve

namespace {

using kvserve::GgmlType;
using Variant = void (*)(GgmlType, const kvserve::MatmulTile&);

struct Shape {
  int n, k;
};

// Seconds of one call of `run` on all n rows.
double TimeCall(Variant run, GgmlType type, const kvserve::MatmulTile& tile) {
  const auto start = std::chrono::steady_clock::now();
  run(type, tile);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Variant> variants;
  for (Variant v : {kvserve::RunA, kvserve::RunB, kvserve::RunC, kvserve::RunD}) {
    if (v != nullptr) variants.push_back(v);
  }
  const std::string type_name = argc > 1 ? argv[1] : "F16";
  const GgmlType type = type_name == "F32"    ? GgmlType::kF32
                        : type_name == "BF16" ? GgmlType::kBF16
                                              : GgmlType::kF16;
  const int m = argc > 2 ? std::atoi(argv[2]) : 128;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 15;
  const Shape shapes[] = {{5632, 2048}, {2048, 5632}, {2048, 2048}, {3072, 768}, {768, 3072}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  kvserve::TileScratch scratch;
  for (const Shape& s : shapes) {
    const size_t row_bytes = kvserve::RowBytes(type, s.k);
    std::vector<uint8_t> w(row_bytes * s.n);
    std::vector<float> row(s.k);
    for (int j = 0; j < s.n; ++j) {
      for (float& v : row) v = dist(rng);
      kvserve::QuantizeRow(type, row.data(), s.k, w.data() + row_bytes * j);
    }
    std::vector<float> x(static_cast<size_t>(m) * s.k);
    for (float& v : x) v = dist(rng);
    std::vector<std::vector<float>> y(variants.size(),
                                      std::vector<float>(static_cast<size_t>(m) * s.n));
    std::vector<std::vector<double>> seconds(variants.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < variants.size(); ++i) {
        const size_t v = (i + round) % variants.size();
        const kvserve::MatmulTile tile{.w = w.data(),
                                       .w_row_bytes = row_bytes,
                                       .x = reinterpret_cast<const uint8_t*>(x.data()),
                                       .x_row_bytes = sizeof(float) * s.k,
                                       .m = m,
                                       .k = s.k,
                                       .n_begin = 0,
                                       .n_end = s.n,
                                       .y = y[v].data(),
                                       .ldy = s.n,
                                       .scratch = &scratch};
        seconds[v].push_back(TimeCall(variants[v], type, tile));
      }
    }
    std::printf("%s m=%d %5dx%-5d", type_name.c_str(), m, s.n, s.k);
    for (size_t v = 0; v < variants.size(); ++v) {
      if (std::memcmp(y[v].data(), y[0].data(), sizeof(float) * y[0].size()) != 0) {
        std::printf("\nversion %c gives other bits than A\n", static_cast<char>('A' + v));
        return 1;
      }
      std::sort(seconds[v].begin(), seconds[v].end());
      const double median = seconds[v][seconds[v].size() / 2];
      std::printf("  %c %6.1f", static_cast<char>('A' + v), 2.0 * m * s.n * s.k / median / 1e9);
    }
    std::printf("  GFLOP/s (medians of %d)\n", rounds);
  }
}
