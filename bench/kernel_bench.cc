// Single-thread matmul kernel benchmark: every weight type on every kernel table this CPU runs.
// Prints GB/s of weights streamed for m = 1 (decode, bandwidth bound; the weights cycle through
// copies totalling 768 MiB so they come from DRAM, not L3) and GFLOP/s (2 m n k / time) for m = 64
// and m = 512 (prefill, compute bound).
//
// Not part of the CMake build; compile ad hoc against the library, e.g.
//   g++ -std=c++20 -O3 -Isrc bench/kernel_bench.cc build/libkvserve_kernels.a \
//       build/libkvserve_io.a build/libkvserve_util.a -lpthread -o /tmp/kernel_bench
//   /tmp/kernel_bench [n k]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/scratch_buffer.h"
#include "kernels/quantize.h"

namespace kvserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Setup {
  GgmlType type;
  int n, k;
  size_t row_bytes;
  std::vector<uint8_t> weights;  // `copies` matrices back to back
  int copies;
  std::vector<float> x;       // [512][k]
  std::vector<BlockQ8_0> xq;  // [512][k / 32]
};

Setup MakeSetup(GgmlType type, int n, int k) {
  Setup s{.type = type, .n = n, .k = k, .row_bytes = RowBytes(type, k)};
  const size_t matrix = s.row_bytes * n;
  s.copies = static_cast<int>((768u << 20) / matrix + 1);
  s.weights.resize(matrix * s.copies);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(k);
  for (int j = 0; j < n; ++j) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(type, row.data(), k, s.weights.data() + s.row_bytes * j);
  }
  for (int c = 1; c < s.copies; ++c) {
    std::copy(s.weights.begin(), s.weights.begin() + matrix, s.weights.begin() + matrix * c);
  }
  s.x.resize(static_cast<size_t>(512) * k);
  for (float& v : s.x) v = dist(rng);
  s.xq.resize(static_cast<size_t>(512) * (k / 32));
  for (int i = 0; i < 512; ++i) {
    ScalarKernels().quantize_row_q8_0(s.x.data() + static_cast<size_t>(i) * k, k,
                                      s.xq.data() + static_cast<size_t>(i) * (k / 32));
  }
  return s;
}

// Seconds per call over weight rows [0, n_run) of copy `copy`.
double TimeCall(const KernelTable& t, Setup& s, int m, int n_run, int copy, std::vector<float>& y) {
  const bool quant = s.type == GgmlType::kQ8_0 || s.type == GgmlType::kQ4_0;
  static TileScratch scratch;  // one thread
  MatmulTile tile{
      .w = s.weights.data() + s.row_bytes * s.n * copy,
      .w_row_bytes = s.row_bytes,
      .x = quant ? reinterpret_cast<const uint8_t*>(s.xq.data())
                 : reinterpret_cast<const uint8_t*>(s.x.data()),
      .x_row_bytes = quant ? sizeof(BlockQ8_0) * (s.k / 32) : sizeof(float) * s.k,
      .m = m,
      .k = s.k,
      .n_begin = 0,
      .n_end = n_run,
      .y = y.data(),
      .ldy = s.n,
      .scratch = &scratch,
  };
  const auto start = Clock::now();
  MatmulFor(t, s.type)(tile);
  return Seconds(start, Clock::now());
}

void Bench(const KernelTable& t, Setup& s) {
  std::vector<float> y(static_cast<size_t>(512) * s.n);
  // Decode: whole matrices, a different copy each call.
  double best = 1e9;
  for (int rep = 0; rep < 2 * s.copies && rep < 40; ++rep) {
    best = std::min(best, TimeCall(t, s, 1, s.n, rep % s.copies, y));
  }
  const double gbs = s.row_bytes * s.n / best / 1e9;
  std::printf("%-7s %-5s m=1   %7.2f GB/s  (%.2f ms)\n", t.isa, GgmlTypeName(s.type), gbs,
              best * 1e3);
  for (int m : {64, 512}) {
    // Fewer weight rows for slow kernels, so a call takes about 0.2 s.
    int n_run = std::min(s.n, 64);
    const double probe = TimeCall(t, s, m, n_run, 0, y);
    n_run = std::min(s.n, std::max(16, static_cast<int>(0.2 / probe * n_run) / 16 * 16));
    double best_call = 1e9;
    for (int rep = 0; rep < 3; ++rep)
      best_call = std::min(best_call, TimeCall(t, s, m, n_run, 0, y));
    const double gflops = 2.0 * m * n_run * static_cast<double>(s.k) / best_call / 1e9;
    std::printf("%-7s %-5s m=%-3d %7.2f GFLOP/s  (%d rows)\n", t.isa, GgmlTypeName(s.type), m,
                gflops, n_run);
  }
}

}  // namespace
}  // namespace kvserve

int main(int argc, char** argv) {
  using namespace kvserve;
  const int n = argc > 2 ? std::atoi(argv[1]) : 5632;
  const int k = argc > 2 ? std::atoi(argv[2]) : 2048;
  std::vector<const KernelTable*> tables = {&ScalarKernels()};
  if (Avx2Kernels() && CpuSupportsAvx2()) tables.push_back(Avx2Kernels());
  if (Avx512Kernels() && CpuSupportsAvx512()) tables.push_back(Avx512Kernels());
  const char* only = std::getenv("BENCH_TYPE");
  std::printf("n=%d k=%d, one thread\n", n, k);
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    if (only && std::string(only) != GgmlTypeName(type)) continue;
    Setup s = MakeSetup(type, n, k);
    for (const KernelTable* t : tables) Bench(*t, s);
  }
  return 0;
}
