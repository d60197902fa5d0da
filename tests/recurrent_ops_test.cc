// The recurrent layers' operations (Backend::ShortConv, GatedDeltaNet, DeltaNetGates,
// SigmoidGate, SigmoidScaleRows; cpu/recurrent_ops.h):
// - against double-precision references written here, within tolerances derived from the float
//   arithmetic (each reference states its own), on odd shapes and batches of runs that start from
//   zeros, from a read-only checkpoint, in place, and as a chain of two runs of one sequence;
// - bit for bit: a sequence split into chained runs gives the bits of one run; a run's results do
//   not depend on the other runs, its rows' place in the batch or the thread count; every kernel
//   table gives the same bits; ProfilingBackend passes the operations through.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/profiling_backend.h"
#include "support/kernel_tables.h"

namespace kvserve {
namespace {

constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr double kTiny = std::numeric_limits<float>::denorm_min();
constexpr int kKernel = 4;         // Qwen3.5's ssm_conv1d
constexpr float kNormEps = 1e-6f;  // the L2 norms' eps (Qwen3.5's rms_norm_eps)

struct Shape {
  int n_k_heads, n_v_heads, head_dim;
};
// Head dims below, at and past the SIMD kernels' 16 lanes and Qwen3.5's 128; conv widths
// (channels) that leave a last chunk of 56, 8 and 32 + 8 channels (tails of their vectors).
constexpr Shape kShapes[] = {{1, 2, 16}, {2, 4, 24}, {1, 3, 24}, {2, 2, 16},
                             {3, 3, 8},  {2, 1, 40}, {1, 2, 128}};

std::string Name(const Shape& s) {
  return "k" + std::to_string(s.n_k_heads) + " v" + std::to_string(s.n_v_heads) + " d" +
         std::to_string(s.head_dim);
}

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint32_t> Seeds(uint32_t first, int n) {
  std::vector<uint32_t> seeds(n);
  for (int i = 0; i < n; ++i) seeds[i] = first + i;
  return seeds;
}

// One batch's inputs: per row q | k | v (rows `stride` floats apart, a few floats of padding),
// which is also the convolution's input (its channels = the row width), and the gates g (log
// decays, <= 0) and beta. Each row's values come from its own seed, so a row can be put anywhere
// in another batch with the same values.
struct Inputs {
  Shape s;
  int n_rows;
  int width;  // 2 * n_k_heads * head_dim + n_v_heads * head_dim
  size_t stride;
  std::vector<float> qkv, g, beta, conv_weight;

  Inputs(Shape shape, const std::vector<uint32_t>& row_seeds)
      : s(shape),
        n_rows(static_cast<int>(row_seeds.size())),
        width((2 * shape.n_k_heads + shape.n_v_heads) * shape.head_dim),
        stride(width + 5),
        qkv(n_rows * stride, 0.0f),
        conv_weight(Uniform(static_cast<size_t>(width) * kKernel, -0.8f, 0.8f, 99)) {
    for (int r = 0; r < n_rows; ++r) {
      const std::vector<float> row = Uniform(width, -1.0f, 1.0f, row_seeds[r]);
      std::copy(row.begin(), row.end(), qkv.begin() + r * stride);
      const std::vector<float> gr = Uniform(s.n_v_heads, -1.5f, 0.0f, row_seeds[r] + 7777);
      const std::vector<float> br = Uniform(s.n_v_heads, 0.0f, 1.0f, row_seeds[r] + 8888);
      g.insert(g.end(), gr.begin(), gr.end());
      beta.insert(beta.end(), br.begin(), br.end());
    }
  }
  size_t delta_state() const { return static_cast<size_t>(s.n_v_heads) * s.head_dim * s.head_dim; }
  size_t conv_state() const { return static_cast<size_t>(kKernel - 1) * width; }
};

std::vector<float> RandomState(size_t n, uint32_t seed) { return Uniform(n, -0.5f, 0.5f, seed); }

// ---- References ---------------------------------------------------------------------------------

// ShortConv of rows [begin, end) from `init` (nullptr: zeros), in double. The float kernel sums
// kKernel products from 0 (error <= kKernel * eps * Σ|w x|), then silu: |silu'| <= 1.1 carries the
// sum's error, and expf, the add and the division add <= 4 eps of the result. The state is copied,
// so it must match exactly.
struct ConvRef {
  std::vector<double> out, tol;  // [end - begin, width]
  std::vector<float> state;      // [kKernel - 1, width]
};
ConvRef ShortConvReference(const Inputs& in, int begin, int end, const float* init) {
  const int hist = kKernel - 1;
  const int w = in.width;
  std::vector<float> window(static_cast<size_t>(hist + end - begin) * w, 0.0f);  // x'
  if (init != nullptr) std::copy(init, init + hist * w, window.begin());
  for (int r = begin; r < end; ++r) {
    std::copy(in.qkv.begin() + r * in.stride, in.qkv.begin() + r * in.stride + w,
              window.begin() + static_cast<size_t>(hist + r - begin) * w);
  }
  ConvRef ref;
  for (int t = 0; t < end - begin; ++t) {
    for (int c = 0; c < w; ++c) {
      double sum = 0, sum_abs = 0;
      for (int j = 0; j < kKernel; ++j) {
        const double p = double{in.conv_weight[c * kKernel + j]} * window[(t + j) * w + c];
        sum += p;
        sum_abs += std::fabs(p);
      }
      const double out = sum / (1.0 + std::exp(-sum));
      ref.out.push_back(out);
      ref.tol.push_back(1.1 * kKernel * kEps * sum_abs + 4 * kEps * std::fabs(out) + kTiny);
    }
  }
  ref.state.assign(window.end() - hist * w, window.end());
  return ref;
}

// The gated delta rule on rows [begin, end) from `init` (nullptr: zeros), in double, with a bound
// on the float kernel's error carried along. Per state row m (2-norm error E): the map
// m -> decay * m (I - beta k kᵀ), |k| = 1, 0 <= beta <= 1, does not grow an error beyond decay * E;
// each step adds at most (head_dim + 8) eps (|decay m| + beta |v_j| + |d|): the dot m·k of
// head_dim terms (<= head_dim eps |m| |k|), the decay, the normalized k and q (<= 3 eps each), the
// subtraction, beta, and the update's multiply and add. An output's error is at most
// scale (E + (head_dim + 4) eps Σ|m_i q_i|); a state value's at most E.
struct DeltaRef {
  std::vector<double> out, out_tol;      // [end - begin, n_v_heads * head_dim]
  std::vector<double> state, state_tol;  // [n_v_heads, head_dim, head_dim]
};
std::vector<double> L2Normalized(const float* x, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const double scale = 1.0 / std::max(std::sqrt(sum), double{kNormEps});
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
  return out;
}
DeltaRef DeltaNetReference(const Inputs& in, int begin, int end, const float* init) {
  const int hd = in.s.head_dim, nv = in.s.n_v_heads, nk = in.s.n_k_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  DeltaRef ref;
  ref.out.resize(static_cast<size_t>(end - begin) * nv * hd);
  ref.out_tol.resize(ref.out.size());
  ref.state.assign(in.delta_state(), 0.0);
  if (init != nullptr) std::copy(init, init + in.delta_state(), ref.state.begin());
  ref.state_tol.assign(in.delta_state(), 0.0);
  std::vector<double> error(static_cast<size_t>(nv) * hd, 0.0);  // E per state row
  for (int r = begin; r < end; ++r) {
    const float* row = in.qkv.data() + r * in.stride;
    for (int h = 0; h < nv; ++h) {
      const std::vector<double> q = L2Normalized(row + (h % nk) * hd, hd);
      const std::vector<double> k = L2Normalized(row + (nk + h % nk) * hd, hd);
      const double decay = std::exp(double{in.g[r * nv + h]});
      const double beta = in.beta[r * nv + h];
      for (int j = 0; j < hd; ++j) {
        double* m = ref.state.data() + (static_cast<size_t>(h) * hd + j) * hd;
        double norm = 0, dot_k = 0;
        for (int i = 0; i < hd; ++i) {
          m[i] *= decay;
          norm += m[i] * m[i];
          dot_k += m[i] * k[i];
        }
        const double v = row[(2 * nk + h) * hd + j];
        const double d = (v - dot_k) * beta;
        double& e = error[h * hd + j];
        e = e * decay + (hd + 8) * kEps * (std::sqrt(norm) + beta * std::fabs(v) + std::fabs(d));
        double dot_q = 0, abs_q = 0;
        for (int i = 0; i < hd; ++i) {
          m[i] += d * k[i];
          dot_q += m[i] * q[i];
          abs_q += std::fabs(m[i] * q[i]);
        }
        const size_t at = (static_cast<size_t>(r - begin) * nv + h) * hd + j;
        ref.out[at] = dot_q * scale;
        ref.out_tol[at] = scale * (e + (hd + 4) * kEps * abs_q) + kTiny;
      }
    }
  }
  for (size_t i = 0; i < ref.state.size(); ++i) ref.state_tol[i] = error[i / hd];
  return ref;
}

// ---- Running the backend
// --------------------------------------------------------------------------

struct Outputs {
  std::vector<float> conv, delta;
};

// Both operations on `in` over `runs`, conv states and delta states in separate RecurrentRuns.
Outputs RunBoth(const Backend& backend, int n_threads, const Inputs& in,
                const std::vector<RecurrentRun>& conv_runs,
                const std::vector<RecurrentRun>& delta_runs) {
  auto ws = backend.NewWorkspace({.n_threads = n_threads});
  Outputs out;
  out.conv.assign(static_cast<size_t>(in.n_rows) * in.width, -7.0f);
  out.delta.assign(static_cast<size_t>(in.n_rows) * in.s.n_v_heads * in.s.head_dim, -7.0f);
  backend.ShortConv(in.qkv.data(), in.stride, in.width, in.conv_weight.data(), kKernel, conv_runs,
                    out.conv.data(), *ws);
  backend.GatedDeltaNet(in.qkv.data(), in.stride, in.g.data(), in.beta.data(), in.s.n_k_heads,
                        in.s.n_v_heads, in.s.head_dim, kNormEps, delta_runs, out.delta.data(), *ws);
  return out;
}

// Checks |got - want| <= tol element by element (NaN fails); returns the worst error / tol.
double ExpectNear(const std::vector<double>& want, const std::vector<double>& tol, const float* got,
                  const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]);
    worst = std::max(worst, error / tol[i]);
    EXPECT_TRUE(error <= tol[i]) << what << " [" << i << "]: " << got[i] << " vs " << want[i]
                                 << ", tolerance " << tol[i];
    if (!(error <= tol[i])) break;
  }
  return worst;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// One batch of runs over one kind of state (conv or delta, `n` floats each), rows:
//   A [0, 7) from zeros;  B [7, 8) from checkpoint ck_b (a decode step);
//   D [8, 11) from checkpoint ck_d, then [11, 15) in place on the first run's `to` (a chain);
//   C [15, 20) in place from c0;  F [20, 20) (no rows: ck_b copied);  G [20, 84) from zeros.
// The checkpoints are read-only: the backend must leave them as they were.
constexpr int kScenarioRows = 84;
struct Scenario {
  std::vector<float> ck_b, ck_d, c0, st_a, st_b, st_c, st_d, st_f, st_g;
  std::vector<RecurrentRun> runs;

  Scenario(size_t n, uint32_t seed)
      : ck_b(RandomState(n, seed)),
        ck_d(RandomState(n, seed + 1)),
        c0(RandomState(n, seed + 2)),
        st_a(n, 9.0f),
        st_b(n, 9.0f),
        st_c(c0),
        st_d(n, 9.0f),
        st_f(n, 9.0f),
        st_g(n, 9.0f) {
    runs = {{0, 7, nullptr, st_a.data()},       {7, 8, ck_b.data(), st_b.data()},
            {8, 11, ck_d.data(), st_d.data()},  {11, 15, st_d.data(), st_d.data()},
            {15, 20, st_c.data(), st_c.data()}, {20, 20, ck_b.data(), st_f.data()},
            {20, 84, nullptr, st_g.data()}};
  }
  // Each sequence as the references take it: rows [begin, end), initial and final state.
  struct Sequence {
    int begin, end;
    const float* init;
    const float* final_state;
  };
  std::vector<Sequence> Sequences() const {
    return {{0, 7, nullptr, st_a.data()},       {7, 8, ck_b.data(), st_b.data()},
            {8, 15, ck_d.data(), st_d.data()},  {15, 20, c0.data(), st_c.data()},
            {20, 20, ck_b.data(), st_f.data()}, {20, 84, nullptr, st_g.data()}};
  }
  bool CheckpointsUnchanged(uint32_t seed) const {
    return ck_b == RandomState(ck_b.size(), seed) && ck_d == RandomState(ck_d.size(), seed + 1);
  }
};

// Every output and state of the scenario against the references.
TEST(RecurrentOps, MatchTheDoubleReferences) {
  const CpuBackend backend;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Name(shape));
    const Inputs in(shape, Seeds(100, kScenarioRows));
    Scenario conv(in.conv_state(), 1), delta(in.delta_state(), 11);
    const Outputs out = RunBoth(backend, 3, in, conv.runs, delta.runs);
    double worst_conv = 0, worst_delta = 0, worst_state = 0;
    for (const Scenario::Sequence& seq : conv.Sequences()) {
      SCOPED_TRACE("rows " + std::to_string(seq.begin) + ".." + std::to_string(seq.end));
      const ConvRef ref = ShortConvReference(in, seq.begin, seq.end, seq.init);
      worst_conv = std::max(
          worst_conv, ExpectNear(ref.out, ref.tol, out.conv.data() + seq.begin * in.width, "conv"));
      EXPECT_TRUE(SameBits(ref.state.data(), seq.final_state, ref.state.size()));
    }
    for (const Scenario::Sequence& seq : delta.Sequences()) {
      SCOPED_TRACE("rows " + std::to_string(seq.begin) + ".." + std::to_string(seq.end));
      const DeltaRef ref = DeltaNetReference(in, seq.begin, seq.end, seq.init);
      const float* got = out.delta.data() + seq.begin * shape.n_v_heads * shape.head_dim;
      worst_delta = std::max(worst_delta, ExpectNear(ref.out, ref.out_tol, got, "delta out"));
      worst_state = std::max(worst_state,
                             ExpectNear(ref.state, ref.state_tol, seq.final_state, "delta state"));
    }
    EXPECT_TRUE(conv.CheckpointsUnchanged(1));
    EXPECT_TRUE(delta.CheckpointsUnchanged(11));
    std::printf("%s: worst error / tolerance: conv %.3g, delta out %.3g, delta state %.3g\n",
                Name(shape).c_str(), worst_conv, worst_delta, worst_state);
  }
}

// Bit equality of two runs of the scenario: outputs and every state.
void ExpectSameScenario(const Outputs& a, const Scenario& a_conv, const Scenario& a_delta,
                        const Outputs& b, const Scenario& b_conv, const Scenario& b_delta) {
  EXPECT_TRUE(a.conv == b.conv);
  EXPECT_TRUE(a.delta == b.delta);
  for (const auto& [x, y] : {std::pair{&a_conv, &b_conv}, std::pair{&a_delta, &b_delta}}) {
    EXPECT_TRUE(x->st_a == y->st_a && x->st_b == y->st_b && x->st_c == y->st_c &&
                x->st_d == y->st_d && x->st_f == y->st_f && x->st_g == y->st_g);
  }
}

TEST(RecurrentOps, TheThreadCountChangesNoBit) {
  const CpuBackend backend;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Name(shape));
    const Inputs in(shape, Seeds(100, kScenarioRows));
    Scenario conv1(in.conv_state(), 1), delta1(in.delta_state(), 11);
    const Outputs one = RunBoth(backend, 1, in, conv1.runs, delta1.runs);
    for (int threads : {2, 3, 5}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      Scenario conv(in.conv_state(), 1), delta(in.delta_state(), 11);
      const Outputs many = RunBoth(backend, threads, in, conv.runs, delta.runs);
      ExpectSameScenario(one, conv1, delta1, many, conv, delta);
    }
  }
}

TEST(RecurrentOps, EveryKernelTableGivesTheSameBits) {
  std::vector<std::string> isas = {"scalar"};
  for (const KernelTable* t : testing::FastTables()) isas.push_back(t->isa);
  if (isas.size() == 1) GTEST_SKIP() << "no SIMD table for this CPU";
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Name(shape));
    const Inputs in(shape, Seeds(100, kScenarioRows));
    Scenario conv0(in.conv_state(), 1), delta0(in.delta_state(), 11);
    const Outputs first = RunBoth(CpuBackend({.isa = isas[0]}), 2, in, conv0.runs, delta0.runs);
    for (size_t i = 1; i < isas.size(); ++i) {
      SCOPED_TRACE(isas[i]);
      const CpuBackend backend({.isa = isas[i]});
      ASSERT_STREQ(backend.kernels().isa, isas[i].c_str());
      Scenario conv(in.conv_state(), 1), delta(in.delta_state(), 11);
      const Outputs got = RunBoth(backend, 2, in, conv.runs, delta.runs);
      ExpectSameScenario(first, conv0, delta0, got, conv, delta);
    }
  }
}

// The tables' delta_rule_step and conv_rows entries against the scalar table's (the plain C++),
// bit for bit, on the sizes around their vectors' lengths, odd row ranges and misaligned pointers:
// from zeros, from another state and in place; convolutions from zeros and from state rows, with
// kernels of 1 to 9 taps (past 8 the SIMD tables hand over to the plain code).
TEST(RecurrentOps, EveryTableEntryGivesThePlainBits) {
  const std::vector<const KernelTable*> tables = testing::FastTables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table for this CPU";
  const KernelTable& plain = ScalarKernels();
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(table->isa);
    for (int hd : {1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 128}) {
      for (int src_kind = 0; src_kind < 3; ++src_kind) {  // zeros, another state, in place
        SCOPED_TRACE("head_dim " + std::to_string(hd) + " src " + std::to_string(src_kind));
        const size_t n = static_cast<size_t>(hd) * hd;
        const std::vector<float> qkv = Uniform(3 * hd + 3, -1.0f, 1.0f, 61 + hd);
        const std::vector<float> from = RandomState(n + 1, 62 + hd);
        // q and k at odd float offsets: misaligned for every vector length.
        const float* q = qkv.data() + 1;
        const float* k = q + hd + 1;
        const float* v = k + hd;
        const int j_begin = hd > 2 ? 1 : 0;
        const int j_end = hd > 6 ? hd - 2 : hd;
        auto run = [&](const KernelTable& t, std::vector<float>& state, std::vector<float>& out) {
          state.assign(n + 1, 3.0f);
          if (src_kind == 2) std::copy(from.begin(), from.end(), state.begin());
          out.assign(hd, -7.0f);
          const float* src = src_kind == 0   ? nullptr
                             : src_kind == 1 ? from.data() + 1
                                             : state.data() + 1;
          t.delta_rule_step({.src = src,
                             .state = state.data() + 1,
                             .q = q,
                             .k = k,
                             .v = v,
                             .out = out.data(),
                             .decay = 0.75f,
                             .beta = 0.625f,
                             .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                             .head_dim = hd,
                             .j_begin = j_begin,
                             .j_end = j_end});
        };
        std::vector<float> want_state, want_out, got_state, got_out;
        run(plain, want_state, want_out);
        run(*table, got_state, got_out);
        EXPECT_TRUE(SameBits(got_state.data(), want_state.data(), want_state.size()));
        EXPECT_TRUE(SameBits(got_out.data(), want_out.data(), hd));
      }
    }
    for (int width : {1, 7, 8, 9, 15, 16, 17, 33, 56, 63, 64}) {
      for (int kernel : {1, 2, 4, 9}) {
        for (bool from_state : {false, true}) {
          SCOPED_TRACE("width " + std::to_string(width) + " kernel " + std::to_string(kernel) +
                       (from_state ? " from state" : " from zeros"));
          constexpr int kRows = 5;
          const size_t stride = width + 3;
          const std::vector<float> x = Uniform(kRows * stride + 1, -2.0f, 2.0f, 71 + width);
          const std::vector<float> hist = RandomState((kernel - 1) * stride + 1, 72 + width);
          const std::vector<float> weight = Uniform(width * kernel + 1, -0.8f, 0.8f, 73);
          auto run = [&](const KernelTable& t) {
            std::vector<float> out(kRows * stride + 1, -7.0f);
            t.conv_rows({.hist = from_state ? hist.data() + 1 : nullptr,
                         .hist_stride = stride,
                         .x = x.data() + 1,
                         .x_stride = stride,
                         .weight = weight.data() + 1,
                         .kernel = kernel,
                         .width = width,
                         .n_rows = kRows,
                         .out = out.data() + 1,
                         .out_stride = stride});
            return out;
          };
          const std::vector<float> got = run(*table), want = run(plain);
          EXPECT_TRUE(SameBits(got.data(), want.data(), want.size()));
        }
      }
    }
  }
}

// One sequence of 12 rows from a checkpoint, as one run and as two chained runs split at `split`
// (in place on the first run's `to`, or into a second buffer): the same outputs and final state,
// bit for bit. Splits of 1 and 2 rows leave part of the old conv state in the new one.
TEST(RecurrentOps, ChainedRunsGiveTheBitsOfOneRun) {
  const CpuBackend backend;
  constexpr int kRows = 12;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Name(shape));
    const Inputs in(shape, Seeds(300, kRows));
    const std::vector<float> conv_ck = RandomState(in.conv_state(), 5);
    const std::vector<float> delta_ck = RandomState(in.delta_state(), 6);
    std::vector<float> conv_one(conv_ck.size()), delta_one(delta_ck.size());
    const Outputs one = RunBoth(backend, 2, in, {{0, kRows, conv_ck.data(), conv_one.data()}},
                                {{0, kRows, delta_ck.data(), delta_one.data()}});
    for (int split : {1, 2, 5, 11}) {
      for (bool in_place : {true, false}) {
        SCOPED_TRACE("split " + std::to_string(split) + (in_place ? " in place" : " copied"));
        std::vector<float> conv_1(conv_ck.size()), conv_2(conv_ck.size());
        std::vector<float> delta_1(delta_ck.size()), delta_2(delta_ck.size());
        float* conv_end = in_place ? conv_1.data() : conv_2.data();
        float* delta_end = in_place ? delta_1.data() : delta_2.data();
        const Outputs two = RunBoth(
            backend, 2, in,
            {{0, split, conv_ck.data(), conv_1.data()}, {split, kRows, conv_1.data(), conv_end}},
            {{0, split, delta_ck.data(), delta_1.data()},
             {split, kRows, delta_1.data(), delta_end}});
        EXPECT_TRUE(two.conv == one.conv);
        EXPECT_TRUE(two.delta == one.delta);
        EXPECT_TRUE(SameBits(conv_end, conv_one.data(), conv_one.size()));
        EXPECT_TRUE(SameBits(delta_end, delta_one.data(), delta_one.size()));
      }
    }
  }
}

// A sequence X of 6 rows alone in a batch (1 thread), and with the scenario's runs before its
// rows and after its run in the list (4 threads): the same bits for X's outputs and state.
TEST(RecurrentOps, ARunIgnoresTheOtherRunsOfTheBatch) {
  const CpuBackend backend;
  constexpr int kRows = 6;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(Name(shape));
    const std::vector<float> conv_ck = RandomState(Inputs(shape, {}).conv_state(), 7);
    const std::vector<float> delta_ck = RandomState(Inputs(shape, {}).delta_state(), 8);
    const Inputs alone(shape, Seeds(500, kRows));
    std::vector<float> conv_alone(conv_ck.size()), delta_alone(delta_ck.size());
    const Outputs a = RunBoth(backend, 1, alone, {{0, kRows, conv_ck.data(), conv_alone.data()}},
                              {{0, kRows, delta_ck.data(), delta_alone.data()}});

    std::vector<uint32_t> seeds = Seeds(100, kScenarioRows);
    for (uint32_t seed : Seeds(500, kRows)) seeds.push_back(seed);
    const Inputs mixed(shape, seeds);
    Scenario conv(mixed.conv_state(), 1), delta(mixed.delta_state(), 11);
    std::vector<float> conv_mixed(conv_ck.size()), delta_mixed(delta_ck.size());
    constexpr int kAt = kScenarioRows;
    conv.runs.insert(conv.runs.begin(),
                     RecurrentRun{kAt, kAt + kRows, conv_ck.data(), conv_mixed.data()});
    delta.runs.insert(delta.runs.begin(),
                      RecurrentRun{kAt, kAt + kRows, delta_ck.data(), delta_mixed.data()});
    const Outputs b = RunBoth(backend, 4, mixed, conv.runs, delta.runs);
    EXPECT_TRUE(SameBits(b.conv.data() + kAt * mixed.width, a.conv.data(), a.conv.size()));
    EXPECT_TRUE(SameBits(b.delta.data() + kAt * shape.n_v_heads * shape.head_dim, a.delta.data(),
                         a.delta.size()));
    EXPECT_TRUE(conv_mixed == conv_alone);
    EXPECT_TRUE(delta_mixed == delta_alone);
  }
}

// The gates' inputs: alpha + dt_bias on both sides of softplus's cut-off at 20 and far below 0.
struct GateInputs {
  static constexpr int kRows = 9, kHeads = 5;
  std::vector<float> alpha = Uniform(kRows * kHeads, -30.0f, 30.0f, 41);
  std::vector<float> beta_in = Uniform(kRows * kHeads, -15.0f, 15.0f, 42);
  std::vector<float> dt_bias = Uniform(kHeads, -2.0f, 2.0f, 43);
  std::vector<float> a = Uniform(kHeads, -3.0f, -0.1f, 44);
};

// g = softplus(alpha + dt_bias) a: the float add (<= eps |x| after softplus, |softplus'| <= 1),
// expf, 1 + e and logf (<= 3 eps absolute), the product (eps relative):
// |error| <= 4 eps |a| (|x| + 1 + softplus). beta = sigmoid: expf, the add and the division,
// <= 4 eps relative.
TEST(RecurrentOps, DeltaNetGatesMatchTheDoubleReference) {
  const CpuBackend backend;
  auto ws = backend.NewWorkspace({.n_threads = 2});
  const GateInputs in;
  constexpr int kN = GateInputs::kRows * GateInputs::kHeads;
  std::vector<float> g(kN), beta(kN);
  backend.DeltaNetGates(in.alpha.data(), in.beta_in.data(), in.dt_bias.data(), in.a.data(),
                        GateInputs::kRows, GateInputs::kHeads, g.data(), beta.data(), *ws);
  std::vector<double> g_ref, g_tol, beta_ref, beta_tol;
  for (int i = 0; i < kN; ++i) {
    const int h = i % GateInputs::kHeads;
    const double x = double{in.alpha[i]} + in.dt_bias[h];
    const double softplus = x > 20 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    g_ref.push_back(softplus * in.a[h]);
    g_tol.push_back(4 * kEps * std::fabs(in.a[h]) * (std::fabs(x) + 1 + softplus) + kTiny);
    beta_ref.push_back(1.0 / (1.0 + std::exp(-double{in.beta_in[i]})));
    beta_tol.push_back(4 * kEps * beta_ref.back() + kTiny);
  }
  ExpectNear(g_ref, g_tol, g.data(), "g");
  ExpectNear(beta_ref, beta_tol, beta.data(), "beta");
}

// x * sigmoid(gate), gate rows `stride` floats apart: <= 5 eps relative (sigmoid's 4, the product).
TEST(RecurrentOps, SigmoidGateMatchesTheDoubleReference) {
  const CpuBackend backend;
  auto ws = backend.NewWorkspace({.n_threads = 2});
  constexpr int kRows = 7, kWidth = 37, kStride = 41;
  const std::vector<float> x0 = Uniform(kRows * kWidth, -3.0f, 3.0f, 51);
  const std::vector<float> gate = Uniform(kRows * kStride, -15.0f, 15.0f, 52);
  std::vector<float> x = x0;
  backend.SigmoidGate(x.data(), gate.data(), kStride, kRows, kWidth, *ws);
  std::vector<double> want, tol;
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kWidth; ++i) {
      want.push_back(x0[r * kWidth + i] / (1.0 + std::exp(-double{gate[r * kStride + i]})));
      tol.push_back(5 * kEps * std::fabs(want.back()) + kTiny);
    }
  }
  ExpectNear(want, tol, x.data(), "sigmoid gate");
}

// x * sigmoid(gate[row]), one factor per row: <= 5 eps relative, as SigmoidGate.
TEST(RecurrentOps, SigmoidScaleRowsMatchesTheDoubleReference) {
  const CpuBackend backend;
  auto ws = backend.NewWorkspace({.n_threads = 2});
  constexpr int kRows = 9, kWidth = 37;
  const std::vector<float> x0 = Uniform(kRows * kWidth, -3.0f, 3.0f, 53);
  const std::vector<float> gate = Uniform(kRows, -15.0f, 15.0f, 54);
  std::vector<float> x = x0;
  backend.SigmoidScaleRows(x.data(), gate.data(), kRows, kWidth, *ws);
  std::vector<double> want, tol;
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kWidth; ++i) {
      want.push_back(x0[r * kWidth + i] / (1.0 + std::exp(-double{gate[r]})));
      tol.push_back(5 * kEps * std::fabs(want.back()) + kTiny);
    }
  }
  ExpectNear(want, tol, x.data(), "sigmoid scale rows");
}

// ProfilingBackend (a ForwardingBackend) gives the CPU backend's bits and times each operation.
TEST(RecurrentOps, ProfilingBackendPassesThemThrough) {
  const CpuBackend cpu;
  ProfilingBackend profiling(cpu);
  const Shape shape = kShapes[1];
  const Inputs in(shape, Seeds(100, kScenarioRows));
  Scenario conv0(in.conv_state(), 1), delta0(in.delta_state(), 11);
  const Outputs want = RunBoth(cpu, 2, in, conv0.runs, delta0.runs);
  Scenario conv(in.conv_state(), 1), delta(in.delta_state(), 11);
  const Outputs got = RunBoth(profiling, 2, in, conv.runs, delta.runs);
  ExpectSameScenario(want, conv0, delta0, got, conv, delta);

  auto ws = profiling.NewWorkspace({.n_threads = 1});
  const GateInputs gates;
  std::vector<float> g(GateInputs::kRows * GateInputs::kHeads), beta(g.size());
  profiling.DeltaNetGates(gates.alpha.data(), gates.beta_in.data(), gates.dt_bias.data(),
                          gates.a.data(), GateInputs::kRows, GateInputs::kHeads, g.data(),
                          beta.data(), *ws);
  profiling.SigmoidGate(g.data(), beta.data(), GateInputs::kHeads, GateInputs::kRows,
                        GateInputs::kHeads, *ws);
  profiling.SigmoidScaleRows(g.data(), beta.data(), GateInputs::kRows, GateInputs::kHeads, *ws);
  std::vector<std::string> names;
  for (const ProfilingBackend::OpTotals& op : profiling.totals()) {
    EXPECT_EQ(op.calls, 1u) << op.name;
    names.push_back(op.name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"delta_net_gates", "gated_delta_net", "short_conv",
                                             "sigmoid_gate", "sigmoid_scale_rows"}));
}

}  // namespace
}  // namespace kvserve
