// The chunked form of the gated delta rule (cpu/delta_chunked.h, KVSERVE_DELTA_CHUNK) against the
// token-by-token form and a double-precision reference, at Qwen3.5-0.8B's head shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/delta_chunked.h"
#include "support/kernel_tables.h"

namespace kvserve {
namespace {

constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr float kNormEps = 1e-6f;

struct Shape {
  int n_k_heads, n_v_heads, head_dim;
};

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Rows of q | k | v, the log decays g <= 0 and beta in [0, 1], and a nonzero starting state. The
// keys of a head share a direction (cosines near 0.5, as trained keys do more than random ones),
// and value head h decays by up to 0.6 (h + 1) / n_v_heads a row: long-memory heads near 1, where
// the chunk's triangular system is the least well conditioned.
struct Inputs {
  Shape s;
  int n_rows;
  size_t stride;
  std::vector<float> qkv, g, beta, init;

  Inputs(Shape shape, int rows, uint32_t seed)
      : s(shape),
        n_rows(rows),
        stride(static_cast<size_t>(2 * shape.n_k_heads + shape.n_v_heads) * shape.head_dim),
        qkv(Uniform(rows * stride, -1.0f, 1.0f, seed)),
        g(Uniform(static_cast<size_t>(rows) * shape.n_v_heads, -0.6f, 0.0f, seed + 1)),
        beta(Uniform(static_cast<size_t>(rows) * shape.n_v_heads, 0.0f, 1.0f, seed + 2)),
        init(Uniform(state_floats(), -0.5f, 0.5f, seed + 3)) {
    const int hd = s.head_dim;
    const std::vector<float> shared =
        Uniform(static_cast<size_t>(s.n_k_heads) * hd, -1, 1, seed + 4);
    for (int r = 0; r < rows; ++r) {
      float* k = qkv.data() + r * stride + static_cast<size_t>(s.n_k_heads) * hd;
      for (size_t i = 0; i < shared.size(); ++i) k[i] = 0.6f * k[i] + shared[i];
      for (int h = 0; h < s.n_v_heads; ++h) g[r * s.n_v_heads + h] *= (h + 1.0f) / s.n_v_heads;
    }
  }
  size_t state_floats() const { return static_cast<size_t>(s.n_v_heads) * s.head_dim * s.head_dim; }
  size_t out_floats() const { return static_cast<size_t>(n_rows) * s.n_v_heads * s.head_dim; }
};

struct Result {
  std::vector<float> out, state;
};

// The backend over chained runs of the given lengths from in.init (run i's `to` is run i+1's
// `from`, in place after the first).
Result RunBackend(const Inputs& in, const std::vector<int>& lengths, int chunk, int threads) {
  const char* isa = std::getenv("KVSERVE_ISA");  // the tables' runs: KVSERVE_ISA=scalar|avx2
  const CpuBackend backend({.isa = isa != nullptr ? isa : "", .delta_chunk = chunk});
  auto ws = backend.NewWorkspace({.n_threads = threads});
  Result r{std::vector<float>(in.out_floats(), -7.0f), std::vector<float>(in.state_floats())};
  std::vector<RecurrentRun> runs;
  int row = 0;
  for (int n : lengths) {
    runs.push_back({.row_begin = row,
                    .row_end = row + n,
                    .from = runs.empty() ? in.init.data() : r.state.data(),
                    .to = r.state.data()});
    row += n;
  }
  backend.GatedDeltaNet(in.qkv.data(), in.stride, in.g.data(), in.beta.data(), in.s.n_k_heads,
                        in.s.n_v_heads, in.s.head_dim, kNormEps, runs, r.out.data(), *ws);
  return r;
}

std::vector<double> L2Normalized(const float* x, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const double scale = 1.0 / std::max(std::sqrt(sum), double{kNormEps});
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
  return out;
}

// The token-by-token rule in double from in.init over all rows.
struct Reference {
  std::vector<double> out, state;
};
Reference DoubleReference(const Inputs& in) {
  const int hd = in.s.head_dim, nv = in.s.n_v_heads, nk = in.s.n_k_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  Reference ref{std::vector<double>(in.out_floats()),
                std::vector<double>(in.init.begin(), in.init.end())};
  for (int r = 0; r < in.n_rows; ++r) {
    const float* row = in.qkv.data() + r * in.stride;
    for (int h = 0; h < nv; ++h) {
      const std::vector<double> q = L2Normalized(row + (h % nk) * hd, hd);
      const std::vector<double> k = L2Normalized(row + (nk + h % nk) * hd, hd);
      const double decay = std::exp(double{in.g[r * nv + h]});
      const double beta = in.beta[r * nv + h];
      for (int j = 0; j < hd; ++j) {
        double* m = ref.state.data() + (static_cast<size_t>(h) * hd + j) * hd;
        double dot_k = 0;
        for (int i = 0; i < hd; ++i) dot_k += (m[i] *= decay) * k[i];
        const double d = (row[(2 * nk + h) * hd + j] - dot_k) * beta;
        double dot_q = 0;
        for (int i = 0; i < hd; ++i) dot_q += (m[i] += d * k[i]) * q[i];
        ref.out[(static_cast<size_t>(r) * nv + h) * hd + j] = dot_q * scale;
      }
    }
  }
  return ref;
}

// ---- The error bound -------------------------------------------------------------------------
//
// Derivation (first order in u = FLT_EPSILON, |x| for elementwise absolute values, k and q of unit
// norm). A float sum of n terms errs by at most Gamma(n) Σ|terms| (Higham, Thm 3.1, γ_n ≈ n u).
// Within a chunk of n rows, with G_t the float cumulative sum of g (g <= 0, so |δG_t| <= (t+1) u
// |G_t|), a decay exp(G_t - G_v) has relative error rd(t, v) = u (2 + (t+1)|G_t| + (v+1)|G_v|).
// Then, per value index j, with E the bound on ||δM[j]||₂ of the incoming state (Cauchy-Schwarz:
// |δM·k| <= E):
//   S0^T k_t:  e_ks(t)  = E + Gamma(hd + 3) Σ_i |M[j][i] k_t[i]|            (the +3: k's L2 norm)
//   rhs_t:     e_r(t)   = β_t (γ_t e_ks + rd γ_t |M[j]·k_t| + 3u (|v| + γ_t |M[j]·k_t|))
//   Δ = T rhs, T = (I + A)^{-1}: the substitution's own rounding l(t) = Gamma(t + 1) (|rhs_t| +
//              Σ_v |A_tv Δ_v|) plus the entries' errors Σ_v eA_tv |Δ_v|, carried by T, so
//              e_Δ = |T| (e_r + l)                    (|T| measured in double: the condition)
//   out_t:     scale (γ_t (E + Gamma(hd + 3) Σ|M q|) + rd γ_t |M·q| + Σ_v |QK_tv| e_Δ(v)
//              + Σ_v eQK_tv |Δ_v| + Gamma(t + 3) (γ_t |M·q| + Σ_v |QK_tv Δ_v|)) + u |out|
//   the state: E' = γ_n E + Σ_v w_v e_Δ(v) + rd γ_n ||M[j]|| + Σ_v rd(n - 1, v) w_v |Δ_v|
//              + Gamma(n + 2) (γ_n ||M[j]|| + Σ_v w_v |Δ_v|),   w_v = exp(G_{n-1} - G_v).
// A run shorter than the chunk is computed token by token: the same bound with n = 1 covers each
// of its steps (decay, dot, update, dot). Gamma is the probabilistic γ̃_n = λ √n u (Higham & Mary
// 2019: holds with probability >= 1 - 2n exp(-λ²/2) per sum for independent roundings) with λ = 4
// rather than the worst case n u, which over-estimates random-sign roundings by √n.
constexpr double kLambda = 4.0;
constexpr double kU = kEps / 2;  // float's unit roundoff
double Gamma(int n) { return kLambda * std::sqrt(static_cast<double>(n)) * kU; }

struct Bounded {
  std::vector<double> out, out_tol, state, state_tol;
};

// One chunk's matrices for head h, rows [r0, r0 + n), in double, with their error bounds.
struct ChunkModel {
  int n = 0;
  std::vector<double> g, gamma, rd_gamma, beta;  // [n]; G_t, exp(G_t), rd(t, -)
  std::vector<std::vector<double>> q, k;         // [n][hd]
  std::vector<double> a, ea, qk, eqk, t_abs, w;  // [n][n] and w [n]
  std::vector<double> t_inv;                     // [n][n], T = (I + A)^{-1}
};

ChunkModel BuildChunk(const Inputs& in, int h, int r0, int n) {
  const int hd = in.s.head_dim, nv = in.s.n_v_heads, nk = in.s.n_k_heads;
  ChunkModel c;
  c.n = n;
  double sum = 0;
  for (int t = 0; t < n; ++t) {
    const float* row = in.qkv.data() + (r0 + t) * in.stride;
    sum += in.g[(r0 + t) * nv + h];
    c.g.push_back(sum);
    c.gamma.push_back(std::exp(sum));
    c.rd_gamma.push_back(2 * kU + Gamma(t + 1) * std::fabs(sum));
    c.beta.push_back(in.beta[(r0 + t) * nv + h]);
    c.q.push_back(L2Normalized(row + (h % nk) * hd, hd));
    c.k.push_back(L2Normalized(row + (nk + h % nk) * hd, hd));
  }
  c.a.assign(n * n, 0.0), c.ea = c.qk = c.eqk = c.t_inv = c.t_abs = c.a;
  for (int t = 0; t < n; ++t) {
    for (int v = 0; v <= t; ++v) {
      const double decay = std::exp(c.g[t] - c.g[v]);
      const double rd = 2 * kU + Gamma(t - v) * std::fabs(c.g[t]);
      double kk = 0, kk_abs = 0, qk = 0, qk_abs = 0;
      for (int i = 0; i < hd; ++i) {
        kk += c.k[t][i] * c.k[v][i], kk_abs += std::fabs(c.k[t][i] * c.k[v][i]);
        qk += c.q[t][i] * c.k[v][i], qk_abs += std::fabs(c.q[t][i] * c.k[v][i]);
      }
      if (v < t) c.a[t * n + v] = c.beta[t] * decay * kk;
      if (v < t)
        c.ea[t * n + v] = c.beta[t] * decay * (rd * std::fabs(kk) + Gamma(hd + 6) * kk_abs);
      c.qk[t * n + v] = decay * qk;
      c.eqk[t * n + v] = decay * (rd * std::fabs(qk) + Gamma(hd + 6) * qk_abs);
    }
  }
  for (int col = 0; col < n; ++col) {  // T column by column, forward substitution
    for (int t = col; t < n; ++t) {
      double x = t == col ? 1.0 : 0.0;
      for (int v = col; v < t; ++v) x -= c.a[t * n + v] * c.t_inv[v * n + col];
      c.t_inv[t * n + col] = x, c.t_abs[t * n + col] = std::fabs(x);
    }
  }
  for (int v = 0; v < n; ++v) c.w.push_back(std::exp(c.g[n - 1] - c.g[v]));
  return c;
}

// Value index j of one chunk: the exact outputs and new state row, and their bounds; `m` is the
// state row M[j] (updated), `e` its error bound (updated).
void ChunkRow(const Inputs& in, const ChunkModel& c, int h, int r0, int j, std::vector<double>& m,
              double& e, Bounded& b) {
  const int hd = in.s.head_dim, nv = in.s.n_v_heads, nk = in.s.n_k_heads, n = c.n;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> mk(n), mq(n), rhs(n), er(n), d(n), ed(n), l(n);
  double norm = 0;
  for (int i = 0; i < hd; ++i) norm += m[i] * m[i];
  norm = std::sqrt(norm);
  for (int t = 0; t < n; ++t) {
    double mk_abs = 0, mq_abs = 0;
    for (int i = 0; i < hd; ++i) {
      mk[t] += m[i] * c.k[t][i], mk_abs += std::fabs(m[i] * c.k[t][i]);
      mq[t] += m[i] * c.q[t][i], mq_abs += std::fabs(m[i] * c.q[t][i]);
    }
    const double v = in.qkv[(r0 + t) * in.stride + (2 * nk + h) * hd + j];
    const double gk = c.gamma[t] * std::fabs(mk[t]);
    rhs[t] = c.beta[t] * (v - c.gamma[t] * mk[t]);
    er[t] = c.beta[t] * (c.gamma[t] * Gamma(hd + 3) * mk_abs + c.rd_gamma[t] * gk +
                         3 * kU * (std::fabs(v) + gk));
    d[t] = rhs[t];
    l[t] = std::fabs(rhs[t]);
    for (int v2 = 0; v2 < t; ++v2) {
      d[t] -= c.a[t * n + v2] * d[v2];
      l[t] += std::fabs(c.a[t * n + v2] * d[v2]);
    }
    l[t] *= Gamma(t + 1);
    for (int v2 = 0; v2 < t; ++v2) l[t] += c.ea[t * n + v2] * std::fabs(d[v2]);
    for (int v2 = 0; v2 <= t; ++v2) ed[t] += c.t_abs[t * n + v2] * (er[v2] + l[v2]);
    double out = c.gamma[t] * mq[t], mag = c.gamma[t] * std::fabs(mq[t]);
    double err = c.gamma[t] * (e + Gamma(hd + 3) * mq_abs) + c.rd_gamma[t] * mag;  // e: carried
    for (int v2 = 0; v2 <= t; ++v2) {
      out += c.qk[t * n + v2] * d[v2];
      mag += std::fabs(c.qk[t * n + v2] * d[v2]);
      err += std::fabs(c.qk[t * n + v2]) * ed[v2] + c.eqk[t * n + v2] * std::fabs(d[v2]);
    }
    const size_t at = (static_cast<size_t>(r0 + t) * nv + h) * hd + j;
    b.out[at] = out * scale;
    b.out_tol[at] = scale * (err + Gamma(t + 3) * mag) + kU * std::fabs(out * scale);
  }
  const double gn = c.gamma[n - 1], rdn = c.rd_gamma[n - 1];
  double dw = 0, edw = 0;  // Σ w_v |Δ_v|, Σ w_v (e_Δ(v) + rd(n - 1, v) |Δ_v|)
  for (int v2 = 0; v2 < n; ++v2) {
    const double rd = 2 * kU + Gamma(n - 1 - v2) * std::fabs(c.g[n - 1]);
    dw += c.w[v2] * std::fabs(d[v2]), edw += c.w[v2] * (ed[v2] + rd * std::fabs(d[v2]));
  }
  for (int i = 0; i < hd; ++i) {
    m[i] *= gn;
    for (int v2 = 0; v2 < n; ++v2) m[i] += c.w[v2] * c.k[v2][i] * d[v2];
  }
  e = gn * e + edw + rdn * gn * norm + Gamma(n + 2) * (gn * norm + dw);
}

// The runs' exact results (in double, chunk by chunk) and the bounds of the backend's chunked
// form with chunk `chunk` (runs shorter than it: token by token, n = 1).
Bounded ChunkedBound(const Inputs& in, const std::vector<int>& lengths, int chunk) {
  const int hd = in.s.head_dim, nv = in.s.n_v_heads;
  Bounded b;
  b.out.resize(in.out_floats()), b.out_tol.resize(in.out_floats());
  b.state.assign(in.init.begin(), in.init.end()), b.state_tol.resize(in.state_floats());
  for (int h = 0; h < nv; ++h) {
    std::vector<double> e(hd, 0.0);
    int r0 = 0;
    for (int len : lengths) {
      const int c = len >= chunk && chunk > 0 ? chunk : 1;
      for (int begin = r0; begin < r0 + len; begin += c) {
        const ChunkModel model = BuildChunk(in, h, begin, std::min(c, r0 + len - begin));
        for (int j = 0; j < hd; ++j) {
          double* row = b.state.data() + (static_cast<size_t>(h) * hd + j) * hd;
          std::vector<double> m(row, row + hd);
          ChunkRow(in, model, h, begin, j, m, e[j], b);
          std::copy(m.begin(), m.end(), row);
        }
      }
      r0 += len;
    }
    for (int j = 0; j < hd; ++j) {
      std::fill_n(b.state_tol.begin() + (static_cast<size_t>(h) * hd + j) * hd, hd, e[j]);
    }
  }
  return b;
}

// The worst ||got[j] - want[j]||₂ / tol over the state rows j (hd floats each).
double WorstRowRatio(const std::vector<float>& got, const std::vector<double>& want,
                     const std::vector<double>& tol, int hd) {
  double worst = 0;
  for (size_t row = 0; row < got.size(); row += hd) {
    double sq = 0;
    for (int i = 0; i < hd; ++i)
      sq += (got[row + i] - want[row + i]) * (got[row + i] - want[row + i]);
    const double r = std::sqrt(sq) / tol[row];
    worst = std::max(worst, std::isnan(r) ? 1e30 : r);
  }
  return worst;
}

// The worst |got - want| / tol (> 1: outside the bound).
double WorstRatio(const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& tol) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double r = std::fabs(got[i] - want[i]) / tol[i];
    worst = std::max(worst, std::isnan(r) ? 1e30 : r);
  }
  return worst;
}

// Checks the backend's results for `lengths` (chained runs) with chunk `chunk` (0: token by
// token) against the bound; returns the worst error / bound of the outputs and the states.
std::pair<double, double> ExpectWithinBound(const Inputs& in, const std::vector<int>& lengths,
                                            int chunk) {
  const Result got = RunBackend(in, lengths, chunk, 2);
  const Bounded b = ChunkedBound(in, lengths, chunk);
  const double out = WorstRatio(got.out, b.out, b.out_tol);
  const double state = WorstRowRatio(got.state, b.state, b.state_tol, in.s.head_dim);
  EXPECT_LE(out, 1.0) << "outputs, chunk " << chunk;
  EXPECT_LE(state, 1.0) << "states, chunk " << chunk;
  std::printf("  chunk %3d, %zu runs: worst error / bound: out %.3f, state %.3f\n", chunk,
              lengths.size(), out, state);
  return {out, state};
}

const std::vector<std::vector<int>> kRunLists = {{300}, {1, 17, 64, 65, 153}, {129, 2, 169}};

// The bound's own arithmetic: its exact values, computed chunk by chunk, are the token-by-token
// rule's (in double, 1e-12: rounding of double only).
TEST(DeltaChunked, TheBoundsExactValuesAreTheTokenByTokenRule) {
  const Inputs in({16, 16, 128}, 300, 11);
  const Reference ref = DoubleReference(in);
  for (const std::vector<int>& lengths : kRunLists) {
    const Bounded b = ChunkedBound(in, lengths, 64);
    for (size_t i = 0; i < b.out.size(); ++i) ASSERT_NEAR(b.out[i], ref.out[i], 1e-12) << i;
    for (size_t i = 0; i < b.state.size(); ++i) ASSERT_NEAR(b.state[i], ref.state[i], 1e-12) << i;
  }
}

// Qwen3.5-0.8B's heads (16 key, 16 value, 128), and a GQA-style case (4 key heads for 8 value
// heads): the chunked form (chunks 16 and 64) and the token-by-token form within their bounds, and
// the bound not loose: the worst error within a factor 100 of it (measured: 16 to 70).
TEST(DeltaChunked, ChunkedAndTokenByTokenStayWithinTheDerivedBound) {
  for (const Shape shape : {Shape{16, 16, 128}, Shape{4, 8, 128}}) {
    SCOPED_TRACE("k" + std::to_string(shape.n_k_heads) + " v" + std::to_string(shape.n_v_heads));
    const Inputs in(shape, 300, 21);
    for (int chunk : {0, 16, 64}) {
      double worst_out = 0, worst_state = 0;
      for (const std::vector<int>& lengths : kRunLists) {
        const auto [out, state] = ExpectWithinBound(in, lengths, chunk);
        worst_out = std::max(worst_out, out), worst_state = std::max(worst_state, state);
      }
      EXPECT_GE(worst_out, 0.01) << "the output bound is loose, chunk " << chunk;
      EXPECT_GE(worst_state, 0.01) << "the state bound is loose, chunk " << chunk;
    }
  }
}

// Single runs of 1..300 rows (every chunk boundary case: 1, C - 1, C, C + 1, 2C, ...), chunk 64.
TEST(DeltaChunked, EveryRunLengthStaysWithinTheBound) {
  const Inputs in({4, 8, 128}, 300, 31);
  for (int n : {1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 299, 300}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    const Inputs part({4, 8, 128}, n, 31);
    ExpectWithinBound(part, {n}, 64);
  }
}

// A head is one task's work: the thread count changes no bit of the chunked form either.
TEST(DeltaChunked, TheThreadCountChangesNoBit) {
  const Inputs in({16, 16, 128}, 200, 41);
  const Result one = RunBackend(in, {70, 130}, 64, 1);
  for (int threads : {2, 3, 5}) {
    const Result many = RunBackend(in, {70, 130}, 64, threads);
    EXPECT_EQ(0, std::memcmp(one.out.data(), many.out.data(), one.out.size() * sizeof(float)));
    EXPECT_EQ(0,
              std::memcmp(one.state.data(), many.state.data(), one.state.size() * sizeof(float)));
  }
}

// kernels.mat_acc on every table this CPU runs, against double: sizes around the vectors' 8, 16
// and 32 columns and the 4-row blocks, odd strides. Each y[r][j] is a sum of m + 1 terms in
// increasing c, rounded once per product and sum (once per term where fused): within
// (m + 1) u Σ_c |x[r][c] b[c][j]| + u |y| of the exact sum.
TEST(DeltaChunked, MatAccMatchesTheDoubleProductOnEveryTable) {
  std::vector<const KernelTable*> tables = testing::FastTables();
  tables.push_back(&ScalarKernels());
  for (const KernelTable* table : tables) {
    SCOPED_TRACE(table->isa);
    for (int n : {0, 1, 3, 4, 5, 9}) {
      for (int m : {0, 1, 7, 16, 64, 129}) {
        for (int w : {1, 7, 8, 15, 16, 17, 31, 32, 33, 128}) {
          const size_t xs = m + 3, bs = w + 5, ys = w + 2;
          const std::vector<float> x = Uniform(n * xs + 1, -1, 1, n * 7 + m);
          const std::vector<float> b = Uniform(m * bs + 1, -1, 1, m * 5 + w);
          std::vector<float> y = Uniform(n * ys + 1, -1, 1, w * 3 + n);
          const std::vector<float> y0 = y;
          table->mat_acc({x.data(), xs, b.data(), bs, y.data(), ys, n, m, w});
          for (int r = 0; r < n; ++r) {
            for (int j = 0; j < w; ++j) {
              double want = y0[r * ys + j], mag = std::fabs(want);
              for (int c = 0; c < m; ++c) {
                want += double{x[r * xs + c]} * b[c * bs + j];
                mag += std::fabs(double{x[r * xs + c]} * b[c * bs + j]);
              }
              ASSERT_NEAR(y[r * ys + j], want, (m + 2) * kU * mag)
                  << "n " << n << " m " << m << " w " << w << " at " << r << ", " << j;
            }
            for (size_t j = w; j < ys && r * ys + j < y.size(); ++j) {
              ASSERT_EQ(y[r * ys + j], y0[r * ys + j]) << "wrote past w";
            }
          }
        }
      }
    }
  }
}

// KVSERVE_DELTA_CHUNK sets it (0..kMaxDeltaChunk; anything else: off, with a warning).
TEST(DeltaChunked, TheEnvironmentSetsTheChunk) {
  const char* saved = std::getenv("KVSERVE_DELTA_CHUNK");
  const std::string keep = saved != nullptr ? saved : "";
  for (const auto& [value, want] : std::vector<std::pair<const char*, int>>{
           {"64", 64}, {"16", 16}, {"0", 0}, {"-3", 0}, {"100000", 0}}) {
    setenv("KVSERVE_DELTA_CHUNK", value, 1);
    EXPECT_EQ(CpuBackendOptions::FromEnvironment().delta_chunk, want) << value;
  }
  unsetenv("KVSERVE_DELTA_CHUNK");
  EXPECT_EQ(CpuBackendOptions::FromEnvironment().delta_chunk, 0);
  if (saved != nullptr) setenv("KVSERVE_DELTA_CHUNK", keep.c_str(), 1);
}

// Off by default, and runs shorter than the chunk keep the token-by-token bits.
TEST(DeltaChunked, ShortRunsAndTheDefaultKeepTheTokenByTokenBits) {
  EXPECT_EQ(CpuBackendOptions{}.delta_chunk, 0);
  const Inputs in({4, 8, 128}, 100, 51);
  const Result tbt = RunBackend(in, {63, 37}, 0, 2);
  const Result ch = RunBackend(in, {63, 37}, 64, 2);
  EXPECT_EQ(0, std::memcmp(tbt.out.data(), ch.out.data(), tbt.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(tbt.state.data(), ch.state.data(), tbt.state.size() * sizeof(float)));
}

}  // namespace
}  // namespace kvserve
