// Single-thread benchmark of the packed (x16) K-quant tiles of the best table this CPU runs:
// cycles per row-super-block (one activation row against one 256-element super-block of a 16-row
// weight group: 4096 multiply-adds, 64 vpdpbusd on AVX-512) at m = 1, 4, 8 and 16 activation rows,
// with the weights in L2 (n = 256 rows) or streamed from memory (n = 131072 rows, 221-277 MiB, on
// huge pages as the engine allocates them: at 32768 rows, 55-69 MiB against a 32 MiB L3, part of
// each pass still hit the L3 and Q4_K at m = 1 read 35-50% faster than the engine's weights do).
// Checks the bits against the scalar stored-layout tile.
// Cycles assume the clock given by KQ_GHZ (default 4; measure yours, e.g. with perf).
//
// Not part of the CMake build; compile ad hoc against the libraries (one command):
//   g++ -std=c++20 -O2 -Isrc bench/kquant_tile_bench.cc build/libkvserve_kernels.a
//       build/libkvserve_kv.a build/libkvserve_io.a build/libkvserve_util.a -lpthread
//       -o /tmp/kquant_tile_bench
//   /tmp/kquant_tile_bench [q4_k|q5_k|q6_k] [n k]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"
#include "util/large_memory.h"

namespace kvserve {
namespace {

GgmlType TypeOf(const std::string& name) {
  if (name == "q5_k") return GgmlType::kQ5_K;
  if (name == "q6_k") return GgmlType::kQ6_K;
  return GgmlType::kQ4_K;
}

void Run(GgmlType type, int n, int k) {
  const KernelTable& table = KernelsFor("");
  const MatmulTileFn packed_fn = PackedMatmulFor(table, type);
  if (packed_fn == nullptr) {
    std::printf("%s: no packed %s tile\n", table.isa, GgmlTypeName(type));
    return;
  }
  const size_t row_bytes = RowBytes(type, k);
  std::vector<uint8_t> stored(row_bytes * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(k);
  for (int j = 0; j < n; ++j) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(type, row.data(), k, stored.data() + row_bytes * j);
  }
  const size_t group_bytes = PackedGroupBytes(type, k);
  uint8_t* packed = static_cast<uint8_t*>(AllocateLarge(group_bytes * (n / 16)));
  PackGroups(type, stored.data(), row_bytes, n, k, 0, n / 16, packed);
  constexpr int kMaxRows = 16;
  const size_t x_row_bytes = RowBytes(GgmlType::kQ8_K, k);
  std::vector<uint8_t> x(kMaxRows * x_row_bytes);
  for (int i = 0; i < kMaxRows; ++i) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(GgmlType::kQ8_K, row.data(), k, x.data() + i * x_row_bytes);
  }
  std::vector<float> y(static_cast<size_t>(kMaxRows) * n), y_ref(y.size());
  TileScratch scratch;
  const double ghz = std::getenv("KQ_GHZ") ? std::atof(std::getenv("KQ_GHZ")) : 4.0;
  for (int m : {1, 4, 8, 16}) {
    MatmulTile tile{.w = packed,
                    .w_row_bytes = group_bytes,
                    .x = x.data(),
                    .x_row_bytes = x_row_bytes,
                    .m = m,
                    .k = k,
                    .n_begin = 0,
                    .n_end = n,
                    .y = y.data(),
                    .ldy = n,
                    .scratch = &scratch};
    double best = 1e9;
    for (int rep = 0; rep < 50; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      packed_fn(tile);
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    MatmulTile ref = tile;
    ref.w = stored.data();
    ref.w_row_bytes = row_bytes;
    ref.y = y_ref.data();
    MatmulFor(ScalarKernels(), type)(ref);
    const bool same = std::memcmp(y.data(), y_ref.data(), sizeof(float) * m * n) == 0;
    const double row_superblocks = double(m) * (n / 16) * (k / 256);
    std::printf("%-7s %s n=%-6d k=%-5d m=%-2d %6.1f cycles per row-super-block  %s\n", table.isa,
                GgmlTypeName(type), n, k, m, best * ghz * 1e9 / row_superblocks,
                same ? "scalar bits" : "DIFFERENT FROM SCALAR");
  }
  FreeLarge(packed);
}

}  // namespace
}  // namespace kvserve

int main(int argc, char** argv) {
  using namespace kvserve;
  const GgmlType type = TypeOf(argc > 1 ? argv[1] : "q4_k");
  if (argc > 3) {
    Run(type, std::atoi(argv[2]), std::atoi(argv[3]));
  } else {
    Run(type, 256, 2048);     // weights in L2
    Run(type, 131072, 2048);  // weights from memory
  }
  return 0;
}
