// In-process A/B of Qwen3.5's recurrent operations on the CPU (cpu/recurrent_ops.h): the Gated
// DeltaNet (q/k L2 norms, then the delta rule over the state) and the short convolution with
// SiLU, at Qwen3.5-0.8B's shape (16 key heads, 16 value heads of 128, conv channels 6144) and
// Qwen3.5-9B's (16 key, 32 value heads of 128, channels 8192), kernel 4. Cases:
//   decode 1x1: one run of one row (one sequence decoding);
//   decode 16x1: 16 runs of one row each (a batch of 16 sequences);
//   prefill 512: one run of 512 rows from zeros;
// on the engine's ThreadPool with 1 and 2 threads. Decode states are updated in place and rotate
// over enough copies (256 MB) that every call reads its states from DRAM, as a model's layers do.
//
// Versions, alternated call by call so that a drift of the machine hits them alike; medians of
// ROUNDS (default 15) rounds, each the mean of several calls:
//   before: the plain recurrent_ops.cc of an earlier commit, compiled as its own object with its
//           exported names prefixed "Before" (see below);
//   scalar, avx2, avx512: the current code through each kernel table (those the CPU supports).
// Every version's outputs and states are checked against before's, bit for bit, first.
// Prints ns per row of each operation and, for decode, the delta rule's state traffic in GB/s
// (a row reads and writes the whole state: 4 bytes x value heads x 128 x 128 x 2 per run).
//
// Not part of the CMake build. With the build's libraries (build/) and the commit to compare
// against (here c764b0f, before the kernel-table entries):
//   mkdir -p /tmp/gdnb/kernels/cpu
//   git show c764b0f:src/kernels/cpu/recurrent_ops.cc > /tmp/gdnb/before.cc
//   git show c764b0f:src/kernels/cpu/recurrent_ops.h > /tmp/gdnb/kernels/cpu/recurrent_ops.h
//   g++ -std=c++20 -O3 -DNDEBUG -I/tmp/gdnb -Isrc -c /tmp/gdnb/before.cc -o /tmp/gdnb/before.o
//       -DShortConvRuns=BeforeShortConvRuns -DGatedDeltaNetRuns=BeforeGatedDeltaNetRuns
//       -DLaneDot=BeforeLaneDot -DL2Normalize=BeforeL2Normalize
//       -DDeltaNetGatesRow=BeforeDeltaNetGatesRow -DSigmoidGateRow=BeforeSigmoidGateRow
//   g++ -std=c++20 -O3 -DNDEBUG -Isrc bench/recurrent_ops_bench.cc /tmp/gdnb/before.o
//       build/libkvserve_{kernels,kv,io,util}.a -lpthread -o /tmp/gdnb/bench
//   /tmp/gdnb/bench            (ROUNDS=n, SHAPE=0.8b|9b, CASE=decode1|decode16|prefill)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/recurrent_ops.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace kvserve {
// The earlier commit's entry points (before.o).
void BeforeShortConvRuns(const ShortConvArgs& args, std::span<const RecurrentRun> runs,
                         ThreadPool& pool);
void BeforeGatedDeltaNetRuns(const DeltaNetArgs& args, std::span<const RecurrentRun> runs,
                             AlignedFloats& scratch, ThreadPool& pool);
}  // namespace kvserve

namespace {

using kvserve::AlignedFloats;
using kvserve::DeltaNetArgs;
using kvserve::KernelTable;
using kvserve::RecurrentRun;
using kvserve::ShortConvArgs;
using kvserve::ThreadPool;

constexpr int kHeadDim = 128;
constexpr int kKernel = 4;
constexpr size_t kRotateBytes = size_t{256} << 20;  // decode states rotate over this much

struct Shape {
  const char* name;
  int n_k_heads, n_v_heads;
  int channels() const { return (2 * n_k_heads + n_v_heads) * kHeadDim; }
  size_t delta_floats() const { return static_cast<size_t>(n_v_heads) * kHeadDim * kHeadDim; }
  size_t conv_floats() const { return static_cast<size_t>(kKernel - 1) * channels(); }
};

struct Case {
  const char* name;
  int n_runs, rows_per_run;
  int rows() const { return n_runs * rows_per_run; }
};

// One version: both operations through either the earlier commit or a kernel table.
struct Version {
  std::string name;
  const KernelTable* table;  // nullptr: before
  void Conv(const ShortConvArgs& a, std::span<const RecurrentRun> runs, ThreadPool& pool) const {
    if (table == nullptr) return kvserve::BeforeShortConvRuns(a, runs, pool);
    kvserve::ShortConvRuns(a, runs, *table, pool);
  }
  void Delta(const DeltaNetArgs& a, std::span<const RecurrentRun> runs, AlignedFloats& scratch,
             ThreadPool& pool) const {
    if (table == nullptr) return kvserve::BeforeGatedDeltaNetRuns(a, runs, scratch, pool);
    kvserve::GatedDeltaNetRuns(a, runs, *table, scratch, pool);
  }
};

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

// The inputs of one (shape, case): rows of q | k | v, gates, and `sets` sets of run states.
struct Problem {
  Shape s;
  Case c;
  int sets;
  std::vector<float> qkv, g, beta, conv_weight, conv_out, delta_out;
  AlignedFloats delta_states, conv_states;  // [sets][n_runs][state]

  Problem(Shape shape, Case kase) : s(shape), c(kase) {
    const bool prefill = c.rows_per_run > 1;
    const size_t set_bytes = sizeof(float) * c.n_runs * s.delta_floats();
    sets = prefill ? 1 : std::max<int>(2, static_cast<int>(kRotateBytes / set_bytes));
    const int width = s.channels();
    qkv = Uniform(static_cast<size_t>(c.rows()) * width, -1.0f, 1.0f, 1);
    g = Uniform(static_cast<size_t>(c.rows()) * s.n_v_heads, -1.5f, 0.0f, 2);
    beta = Uniform(g.size(), 0.0f, 1.0f, 3);
    conv_weight = Uniform(static_cast<size_t>(width) * kKernel, -0.8f, 0.8f, 4);
    conv_out.resize(static_cast<size_t>(c.rows()) * width);
    delta_out.resize(static_cast<size_t>(c.rows()) * s.n_v_heads * kHeadDim);
    delta_states.resize(static_cast<size_t>(sets) * c.n_runs * s.delta_floats());
    conv_states.resize(static_cast<size_t>(sets) * c.n_runs * s.conv_floats());
    Reset();
  }
  void Reset() {
    const std::vector<float> d = Uniform(delta_states.size(), -0.5f, 0.5f, 5);
    std::copy(d.begin(), d.end(), delta_states.begin());
    const std::vector<float> cs = Uniform(conv_states.size(), -1.0f, 1.0f, 6);
    std::copy(cs.begin(), cs.end(), conv_states.begin());
  }
  // The runs of state set `set`: decode in place; prefill from zeros into the set.
  std::vector<RecurrentRun> Runs(float* states, size_t floats, int set) const {
    std::vector<RecurrentRun> runs;
    for (int r = 0; r < c.n_runs; ++r) {
      float* st = states + (static_cast<size_t>(set) * c.n_runs + r) * floats;
      runs.push_back(
          {r * c.rows_per_run, (r + 1) * c.rows_per_run, c.rows_per_run > 1 ? nullptr : st, st});
    }
    return runs;
  }
  ShortConvArgs ConvArgs() {
    return {.x = qkv.data(),
            .x_stride = static_cast<size_t>(s.channels()),
            .channels = s.channels(),
            .weight = conv_weight.data(),
            .kernel = kKernel,
            .out = conv_out.data()};
  }
  DeltaNetArgs DeltaArgs() {
    return {.qkv = qkv.data(),
            .qkv_stride = static_cast<size_t>(s.channels()),
            .g = g.data(),
            .beta = beta.data(),
            .n_k_heads = s.n_k_heads,
            .n_v_heads = s.n_v_heads,
            .head_dim = kHeadDim,
            .eps = 1e-6f,
            .out = delta_out.data()};
  }
};

// Every version against the first on fresh states: outputs and states bit for bit.
bool SameBits(Problem& p, const std::vector<Version>& versions, ThreadPool& pool) {
  std::vector<float> conv0, delta0, cst0, dst0;
  for (size_t v = 0; v < versions.size(); ++v) {
    p.Reset();
    AlignedFloats scratch;
    versions[v].Conv(p.ConvArgs(), p.Runs(p.conv_states.data(), p.s.conv_floats(), 0), pool);
    versions[v].Delta(p.DeltaArgs(), p.Runs(p.delta_states.data(), p.s.delta_floats(), 0), scratch,
                      pool);
    std::vector<float> cst(p.conv_states.begin(), p.conv_states.end());
    std::vector<float> dst(p.delta_states.begin(), p.delta_states.end());
    if (v == 0) {
      conv0 = p.conv_out, delta0 = p.delta_out, cst0 = cst, dst0 = dst;
      continue;
    }
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
    };
    if (!same(p.conv_out, conv0) || !same(p.delta_out, delta0) || !same(cst, cst0) ||
        !same(dst, dst0)) {
      std::printf("%s %s: %s gives other bits than %s\n", p.s.name, p.c.name,
                  versions[v].name.c_str(), versions[0].name.c_str());
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

}  // namespace

int main() {
  std::vector<Version> versions = {{"before", nullptr}, {"scalar", &kvserve::ScalarKernels()}};
  if (kvserve::Avx2Kernels() != nullptr && kvserve::CpuSupportsAvx2()) {
    versions.push_back({"avx2", kvserve::Avx2Kernels()});
  }
  if (kvserve::Avx512Kernels() != nullptr && kvserve::CpuSupportsAvx512()) {
    versions.push_back({"avx512", kvserve::Avx512Kernels()});
  }
  const char* env_rounds = std::getenv("ROUNDS");
  const int rounds = env_rounds != nullptr ? std::atoi(env_rounds) : 15;
  const std::string only_shape = std::getenv("SHAPE") != nullptr ? std::getenv("SHAPE") : "";
  const std::string only_case = std::getenv("CASE") != nullptr ? std::getenv("CASE") : "";
  const Shape shapes[] = {{"0.8b", 16, 16}, {"9b", 16, 32}};
  const Case cases[] = {{"decode1", 1, 1}, {"decode16", 16, 1}, {"prefill", 1, 512}};
  std::printf("medians of %d rounds (versions alternating call by call); ns per row; state GB/s\n",
              rounds);
  for (const Shape& shape : shapes) {
    if (!only_shape.empty() && only_shape != shape.name) continue;
    for (const Case& kase : cases) {
      if (!only_case.empty() && only_case != kase.name) continue;
      Problem p(shape, kase);
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        if (threads == 1 && !SameBits(p, versions, pool)) return 1;
        // Calls per sample: about 20 ms of the slowest version.
        const int calls = kase.rows_per_run > 1 ? 1 : std::max(4, 2 * p.sets);
        std::vector<std::vector<double>> conv_ns(versions.size()), delta_ns(versions.size());
        AlignedFloats scratch;
        int set = 0;
        for (int round = 0; round < rounds; ++round) {
          for (size_t v = 0; v < versions.size(); ++v) {
            double t0 = Now();
            for (int i = 0; i < calls; ++i) {
              versions[v].Delta(
                  p.DeltaArgs(),
                  p.Runs(p.delta_states.data(), shape.delta_floats(), (set + i) % p.sets), scratch,
                  pool);
            }
            double t1 = Now();
            delta_ns[v].push_back((t1 - t0) / calls / kase.rows() * 1e9);
            t0 = Now();
            for (int i = 0; i < calls; ++i) {
              versions[v].Conv(
                  p.ConvArgs(),
                  p.Runs(p.conv_states.data(), shape.conv_floats(), (set + i) % p.sets), pool);
            }
            t1 = Now();
            conv_ns[v].push_back((t1 - t0) / calls / kase.rows() * 1e9);
            set = (set + calls) % p.sets;
          }
        }
        for (size_t v = 0; v < versions.size(); ++v) {
          const double delta = Median(delta_ns[v]), conv = Median(conv_ns[v]);
          const double state_bytes = 2.0 * sizeof(float) * shape.delta_floats();
          std::printf("%-4s %-8s %dT %-6s  gated_delta_net %9.0f ns/row", shape.name, kase.name,
                      threads, versions[v].name.c_str(), delta);
          if (kase.rows_per_run == 1) std::printf(" (%5.1f GB/s)", state_bytes / delta);
          std::printf("  short_conv %7.0f ns/row\n", conv);
        }
      }
    }
  }
}
