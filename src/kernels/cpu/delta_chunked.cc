#include "kernels/cpu/delta_chunked.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kvserve {

namespace {

void Grow(DeltaChunkScratch& s, int hd, int chunk) {
  const size_t c = static_cast<size_t>(chunk);
  s.ks.resize(c * hd);
  s.qs.resize(c * hd);
  s.kt.resize(c * hd);
  s.dt.resize(c * hd);
  s.wk.resize(c * hd);
  s.a.resize(c * c);
  s.qk.resize(c * c);
  s.g.resize(c);
}

// y = 0, then y += x b through the table ([n, m] times [m, w]).
void Product(const KernelTable& kernels, const MatAcc& p) {
  for (int r = 0; r < p.n; ++r) std::fill_n(p.y + r * p.y_stride, p.w, 0.0f);
  kernels.mat_acc(p);
}

// The chunk's rows [r0, r0 + n): G_t, k^T, and the two n x n matrices
// a[t][u] = -β_t exp(G_t - G_u) (k_t·k_u) (u < t; negated for the substitution) and
// qk[t][u] = exp(G_t - G_u) (q_t·k_u) (u <= t; 0 past t). q0, k0: row r0's q and k; rows
// `qk_stride` floats apart.
void ChunkMatrices(const DeltaNetArgs& a, const KernelTable& kernels, const float* q0,
                   const float* k0, size_t qk_stride, int h, int r0, int n, int chunk,
                   DeltaChunkScratch& s) {
  const int hd = a.head_dim;
  const size_t c = static_cast<size_t>(chunk);
  float sum = 0.0f;
  for (int t = 0; t < n; ++t) {
    sum += a.g[static_cast<size_t>(r0 + t) * a.n_v_heads + h];
    s.g[t] = sum;
    for (int i = 0; i < hd; ++i) s.kt[i * c + t] = k0[t * qk_stride + i];
  }
  Product(kernels, {k0, qk_stride, s.kt.data(), c, s.a.data(), c, n, hd, n});
  Product(kernels, {q0, qk_stride, s.kt.data(), c, s.qk.data(), c, n, hd, n});
  for (int t = 0; t < n; ++t) {
    const float beta = a.beta[static_cast<size_t>(r0 + t) * a.n_v_heads + h];
    float* a_row = s.a.data() + t * c;
    float* qk_row = s.qk.data() + t * c;
    for (int u = 0; u < n; ++u) {
      const float decay = u <= t ? std::exp(s.g[t] - s.g[u]) : 0.0f;
      a_row[u] = -(beta * decay * a_row[u]);
      qk_row[u] = decay * qk_row[u];
    }
  }
}

// Δ by forward substitution, in place of ks = S0^T k_t (row t needs rows u < t), then the
// outputs: γ_t S0^T q_t + Σ_u qk[t][u] Δ_u, times the scale.
void SolveAndOutput(const DeltaNetArgs& a, const KernelTable& kernels, int h, int r0, int n,
                    int chunk, DeltaChunkScratch& s) {
  const int hd = a.head_dim;
  const size_t k_width = static_cast<size_t>(a.n_k_heads) * hd;
  const size_t c = static_cast<size_t>(chunk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t out_stride = static_cast<size_t>(a.n_v_heads) * hd;
  float* out0 = a.out + static_cast<size_t>(r0) * out_stride + static_cast<size_t>(h) * hd;
  for (int t = 0; t < n; ++t) {
    const size_t r = static_cast<size_t>(r0 + t);
    const float* v = a.qkv + r * a.qkv_stride + 2 * k_width + static_cast<size_t>(h) * hd;
    const float beta = a.beta[r * a.n_v_heads + h];
    const float gamma = std::exp(s.g[t]);
    float* d = s.ks.data() + t * static_cast<size_t>(hd);
    for (int j = 0; j < hd; ++j) d[j] = beta * (v[j] - gamma * d[j]);
    kernels.mat_acc({s.a.data() + t * c, c, s.ks.data(), static_cast<size_t>(hd), d,
                     static_cast<size_t>(hd), 1, t, hd});
    float* out = out0 + t * out_stride;
    const float* qs = s.qs.data() + t * static_cast<size_t>(hd);
    for (int j = 0; j < hd; ++j) out[j] = gamma * qs[j];
  }
  kernels.mat_acc(
      {s.qk.data(), c, s.ks.data(), static_cast<size_t>(hd), out0, out_stride, n, n, hd});
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < hd; ++j) out0[t * out_stride + j] *= scale;
  }
}

// S0^T k_t and S0^T q_t as rows t of ks and qs: y[j][t] = M[j]·k_t (M: the state in its own
// layout, rows j; nullptr: zeros) into the [d, C] scratch dt, then transposed.
void StateProducts(const KernelTable& kernels, const float* m, const float* q0, const float* k0,
                   size_t qk_stride, int hd, int n, int chunk, DeltaChunkScratch& s) {
  const size_t c = static_cast<size_t>(chunk), d = static_cast<size_t>(hd);
  if (m == nullptr) {
    std::fill_n(s.ks.data(), n * d, 0.0f);
    std::fill_n(s.qs.data(), n * d, 0.0f);
    return;
  }
  for (int t = 0; t < n; ++t) {  // kt[i][t] = q_t[i], in dt's place
    for (int i = 0; i < hd; ++i) s.dt[i * c + t] = q0[t * qk_stride + i];
  }
  Product(kernels, {m, d, s.dt.data(), c, s.wk.data(), c, hd, hd, n});
  for (int j = 0; j < hd; ++j) {
    for (int t = 0; t < n; ++t) s.qs[t * d + j] = s.wk[j * c + t];
  }
  Product(kernels, {m, d, s.kt.data(), c, s.wk.data(), c, hd, hd, n});
  for (int j = 0; j < hd; ++j) {
    for (int t = 0; t < n; ++t) s.ks[t * d + j] = s.wk[j * c + t];
  }
}

// M = γ_{n-1} M0 + Σ_u Δ_u (exp(G_{n-1} - G_u) k_u)^T in the state's layout: to = γ src (src
// nullptr: zeros; src == to: in place), then to += Δ^T [d, n] times the decayed k [n, d].
void UpdateState(const KernelTable& kernels, const float* src, float* to, const float* k0,
                 size_t qk_stride, int hd, int n, int chunk, DeltaChunkScratch& s) {
  const size_t c = static_cast<size_t>(chunk), d = static_cast<size_t>(hd);
  const float last = s.g[n - 1];
  const float gamma = std::exp(last);
  for (int u = 0; u < n; ++u) {
    const float w = std::exp(last - s.g[u]);
    for (int i = 0; i < hd; ++i) s.wk[u * d + i] = w * k0[u * qk_stride + i];
    for (int j = 0; j < hd; ++j) s.dt[j * c + u] = s.ks[u * d + j];
  }
  for (size_t i = 0; i < d * d; ++i) to[i] = src != nullptr ? gamma * src[i] : 0.0f;
  kernels.mat_acc({s.dt.data(), c, s.wk.data(), d, to, d, hd, n, hd});
}

}  // namespace

void DeltaRuleChunkedRun(const DeltaNetArgs& a, const KernelTable& kernels, const float* qk,
                         const RecurrentRun& run, int h, int chunk, DeltaChunkScratch& scratch) {
  const int hd = a.head_dim;
  const size_t head_floats = static_cast<size_t>(hd) * hd;
  Grow(scratch, hd, chunk);
  const size_t k_width = static_cast<size_t>(a.n_k_heads) * hd;
  const size_t qk_stride = 2 * k_width;
  const float* src = run.from != nullptr ? run.from + h * head_floats : nullptr;
  float* to = run.to + h * head_floats;
  for (int r0 = run.row_begin; r0 < run.row_end; r0 += chunk) {
    const int n = std::min(chunk, run.row_end - r0);
    const float* q0 = qk + qk_stride * r0 + static_cast<size_t>(h % a.n_k_heads) * hd;
    const float* k0 = q0 + k_width;
    ChunkMatrices(a, kernels, q0, k0, qk_stride, h, r0, n, chunk, scratch);
    StateProducts(kernels, src, q0, k0, qk_stride, hd, n, chunk, scratch);
    SolveAndOutput(a, kernels, h, r0, n, chunk, scratch);
    UpdateState(kernels, src, to, k0, qk_stride, hd, n, chunk, scratch);
    src = to;
  }
}

}  // namespace kvserve
