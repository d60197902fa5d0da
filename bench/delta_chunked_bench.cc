// In-process A/B of the gated delta rule's two forms (cpu/recurrent_ops.h, delta_chunked.h): one
// 512-row prefill (from a nonzero state; one run, or RUN=16: chained runs of 16 as the engine cuts
// a prompt at its blocks) at Qwen3.5-0.8B's shape (16 key heads, 16 value heads
// of 128) through GatedDeltaNetRuns with DeltaNetArgs::chunk = 0 (token by token, the best kernel
// table of this CPU) and chunk = 16, 32, 64, 128, on the engine's ThreadPool. Versions alternate
// call by call; prints the median over ROUNDS (default 9) rounds of ms per call (q/k norms
// included, the same for every version).
//
// Not part of the CMake build. With the build's libraries (build/):
//   g++ -std=c++20 -O3 -DNDEBUG -Isrc bench/delta_chunked_bench.cc
//       build/libkvserve_{kernels,kv,io,util}.a -lpthread -o /tmp/delta_chunked_bench
//   /tmp/delta_chunked_bench            (ROUNDS=n, THREADS=n (default 2), ROWS=n (default 512),
//                                        RUN=n: chained runs of n rows, as the engine's blocks)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/recurrent_ops.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace kvserve {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

int Main() {
  const int nk = 16, nv = 16, hd = 128;
  const int rows = EnvInt("ROWS", 512), rounds = EnvInt("ROUNDS", 9);
  ThreadPool pool(EnvInt("THREADS", 2));
  const KernelTable& kernels = KernelsFor("");
  const size_t stride = static_cast<size_t>(2 * nk + nv) * hd;
  const std::vector<float> qkv = Uniform(rows * stride, -1, 1, 1);
  const std::vector<float> g = Uniform(static_cast<size_t>(rows) * nv, -0.5f, 0, 2);
  const std::vector<float> beta = Uniform(static_cast<size_t>(rows) * nv, 0, 1, 3);
  const std::vector<float> init = Uniform(static_cast<size_t>(nv) * hd * hd, -0.5f, 0.5f, 4);
  std::vector<float> state(init.size()), out(static_cast<size_t>(rows) * nv * hd);
  AlignedFloats scratch;
  const std::vector<int> chunks = {0, 16, 32, 64, 128};
  std::vector<std::vector<double>> ms(chunks.size());
  const int run_rows = EnvInt("RUN", rows);
  std::vector<RecurrentRun> runs;
  for (int r = 0; r < rows; r += run_rows) {
    runs.push_back({.row_begin = r,
                    .row_end = std::min(rows, r + run_rows),
                    .from = r == 0 ? init.data() : state.data(),
                    .to = state.data()});
  }
  auto call = [&](int chunk) {
    GatedDeltaNetRuns({.qkv = qkv.data(),
                       .qkv_stride = stride,
                       .g = g.data(),
                       .beta = beta.data(),
                       .n_k_heads = nk,
                       .n_v_heads = nv,
                       .head_dim = hd,
                       .eps = 1e-6f,
                       .out = out.data(),
                       .chunk = chunk},
                      runs, kernels, scratch, pool);
  };
  for (int chunk : chunks) call(chunk);  // warm-up
  for (int r = 0; r < rounds; ++r) {
    for (size_t v = 0; v < chunks.size(); ++v) {
      const double t0 = Now();
      call(chunks[v]);
      ms[v].push_back((Now() - t0) * 1e3);
    }
  }
  std::printf(
      "delta rule, %d rows in runs of %d, 16/16 heads of 128, %d threads, table %s, %d "
      "rounds:\n",
      rows, run_rows, pool.size(), kernels.isa, rounds);
  for (size_t v = 0; v < chunks.size(); ++v) {
    std::printf("  %-16s median %7.2f ms  (min %.2f, max %.2f)\n",
                chunks[v] == 0 ? "token by token" : ("chunk " + std::to_string(chunks[v])).c_str(),
                Median(ms[v]), *std::min_element(ms[v].begin(), ms[v].end()),
                *std::max_element(ms[v].begin(), ms[v].end()));
  }
  return 0;
}

}  // namespace
}  // namespace kvserve

int main() { return kvserve::Main(); }
