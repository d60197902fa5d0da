// The AMX table's packed Q8_0 / Q4_0 prompt matmuls against the AVX-512 table's, one thread, in
// one process: per shape (n_out x n_in, m activation rows) the two run in turn for 15 rounds, the
// medians in GFLOP/s, and the bits compared (it stops at the first shape where they differ).
// Needs a CPU with AMX-INT8 (Intel Xeon since Sapphire Rapids) and a build of the kernels:
//   g++ -std=c++20 -O2 -Isrc bench/amx_prefill_ab.cc build/libkvserve_{kernels,kv,io,util}.a
//       -lpthread -o /tmp/amx_ab
//   /tmp/amx_ab [q8_0|q4_0 [SHAPES]]    SHAPES: 2048x2048x128,2048x5632x512,5632x2048x128 (default)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"

namespace {

using kvserve::GgmlType;

struct Shape {
  int n, k, m;
};

std::vector<Shape> ParseShapes(const char* list) {
  std::vector<Shape> shapes;
  Shape s{};
  int used = 0;
  while (std::sscanf(list, "%dx%dx%d%n", &s.n, &s.k, &s.m, &used) == 3) {
    shapes.push_back(s);
    list += used;
    if (*list != ',') break;
    ++list;
  }
  return shapes;
}

// A stored matrix of n rows: Q8_0 rows quantized from normal floats; Q4_0 random nibbles with a
// scale of about 0.1.
std::vector<uint8_t> StoredMatrix(GgmlType type, int n, int k, size_t row_bytes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint8_t> w(row_bytes * n);
  std::vector<float> row(k);
  for (int j = 0; j < n; ++j) {
    uint8_t* out = w.data() + row_bytes * j;
    if (type == GgmlType::kQ8_0) {
      for (float& v : row) v = dist(rng);
      kvserve::ScalarKernels().quantize_row_q8_0(row.data(), k,
                                                 reinterpret_cast<kvserve::BlockQ8_0*>(out));
      continue;
    }
    for (int b = 0; b < k / 32; ++b) {
      uint8_t* block = out + sizeof(kvserve::BlockQ4_0) * b;
      const uint16_t scale = 0x2e66;
      std::memcpy(block, &scale, sizeof(scale));
      for (int i = 2; i < static_cast<int>(sizeof(kvserve::BlockQ4_0)); ++i) block[i] = rng();
    }
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (!kvserve::CpuSupportsAmx()) {
    std::printf("this CPU has no usable AMX-INT8\n");
    return 1;
  }
  const GgmlType type =
      argc > 1 && std::string(argv[1]) == "q4_0" ? GgmlType::kQ4_0 : GgmlType::kQ8_0;
  const std::vector<Shape> shapes =
      ParseShapes(argc > 2 ? argv[2] : "2048x2048x128,2048x5632x512,5632x2048x128");
  const kvserve::KernelTable& amx = kvserve::KernelsFor("amx");
  const kvserve::KernelTable& avx512 = kvserve::KernelsFor("avx512");
  const kvserve::MatmulTileFn fns[2] = {kvserve::PackedMatmulFor(avx512, type),
                                        kvserve::PackedMatmulFor(amx, type)};
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    const size_t row_bytes = kvserve::RowBytes(type, s.k);
    const std::vector<uint8_t> stored = StoredMatrix(type, s.n, s.k, row_bytes);
    std::vector<uint8_t> packed_storage(kvserve::PackedMatrixBytes(type, s.n, s.k) + 64);
    uint8_t* packed =
        packed_storage.data() + (64 - reinterpret_cast<uintptr_t>(packed_storage.data()) % 64) % 64;
    kvserve::PackGroups(type, stored.data(), row_bytes, s.n, s.k, 0, (s.n + 15) / 16, packed);
    const size_t x_row_bytes = sizeof(kvserve::BlockQ8_0) * (s.k / 32);
    std::vector<uint8_t> x(x_row_bytes * s.m);
    std::vector<float> row(s.k);
    for (int i = 0; i < s.m; ++i) {
      for (float& v : row) v = dist(rng);
      avx512.quantize_row_q8_0(row.data(), s.k,
                               reinterpret_cast<kvserve::BlockQ8_0*>(x.data() + x_row_bytes * i));
    }
    std::vector<float> y[2] = {std::vector<float>(static_cast<size_t>(s.m) * s.n),
                               std::vector<float>(static_cast<size_t>(s.m) * s.n)};
    std::vector<double> seconds[2];
    kvserve::TileScratch scratch;
    for (int round = 0; round < 15; ++round) {
      for (int v = 0; v < 2; ++v) {
        const auto start = std::chrono::steady_clock::now();
        fns[v](kvserve::MatmulTile{.w = packed,
                                   .w_row_bytes = kvserve::PackedGroupBytes(type, s.k),
                                   .x = x.data(),
                                   .x_row_bytes = x_row_bytes,
                                   .m = s.m,
                                   .k = s.k,
                                   .n_begin = 0,
                                   .n_end = s.n,
                                   .y = y[v].data(),
                                   .ldy = s.n,
                                   .scratch = &scratch});
        seconds[v].push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    }
    const double flop = 2.0 * s.m * s.n * s.k;
    double gflops[2];
    for (int v = 0; v < 2; ++v) {
      std::sort(seconds[v].begin(), seconds[v].end());
      gflops[v] = flop / seconds[v][seconds[v].size() / 2] / 1e9;
    }
    const bool same = std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size()) == 0;
    std::printf("%s %5dx%-5d m=%-4d avx512 %6.1f GFLOP/s  amx %6.1f GFLOP/s  %.2fx  %s\n",
                kvserve::GgmlTypeName(type), s.n, s.k, s.m, gflops[0], gflops[1],
                gflops[1] / gflops[0], same ? "same bits" : "OTHER BITS");
    if (!same) return 1;
  }
  return 0;
}
