#include "kernels/cpu/delta_chunked.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kvserve {

namespace {

// y[j] += alpha * x[j].  [n]
void Axpy(float alpha, const float* x, float* y, int n) {
  for (int j = 0; j < n; ++j) y[j] += alpha * x[j];
}

void Grow(DeltaChunkScratch& s, int hd, int chunk) {
  const size_t c = static_cast<size_t>(chunk);
  s.s.resize(static_cast<size_t>(hd) * hd);
  s.ks.resize(c * hd);
  s.qs.resize(c * hd);
  s.a.resize(c * c);
  s.qk.resize(c * c);
  s.g.resize(c);
  s.k.resize(c);
  s.q.resize(c);
}

// The chunk's rows [r0, r0 + n): G_t, the q and k pointers, and the two n x n matrices
// a[t][u] = β_t exp(G_t - G_u) (k_t·k_u) (u < t) and qk[t][u] = exp(G_t - G_u) (q_t·k_u) (u <= t).
void ChunkMatrices(const DeltaNetArgs& a, const float* qk, int h, int r0, int n, int chunk,
                   DeltaChunkScratch& s) {
  const int hd = a.head_dim;
  const size_t k_width = static_cast<size_t>(a.n_k_heads) * hd;
  const int kh = h % a.n_k_heads;
  float sum = 0.0f;
  for (int t = 0; t < n; ++t) {
    const size_t r = static_cast<size_t>(r0 + t);
    sum += a.g[r * a.n_v_heads + h];
    s.g[t] = sum;
    s.q[t] = qk + 2 * k_width * r + static_cast<size_t>(kh) * hd;
    s.k[t] = s.q[t] + k_width;
  }
  for (int t = 0; t < n; ++t) {
    const float beta = a.beta[static_cast<size_t>(r0 + t) * a.n_v_heads + h];
    float* a_row = s.a.data() + static_cast<size_t>(t) * chunk;
    float* qk_row = s.qk.data() + static_cast<size_t>(t) * chunk;
    for (int u = 0; u <= t; ++u) {
      const float decay = std::exp(s.g[t] - s.g[u]);
      if (u < t) a_row[u] = beta * decay * LaneDot(s.k[t], s.k[u], hd);
      qk_row[u] = decay * LaneDot(s.q[t], s.k[u], hd);
    }
  }
}

// ks[t] = S0^T k_t and qs[t] = S0^T q_t for the chunk's n rows (S0 = s.s, [key i][value j]).
void StateProducts(int hd, int n, DeltaChunkScratch& s) {
  for (int t = 0; t < n; ++t) {
    float* ks = s.ks.data() + static_cast<size_t>(t) * hd;
    float* qs = s.qs.data() + static_cast<size_t>(t) * hd;
    std::fill(ks, ks + hd, 0.0f);
    std::fill(qs, qs + hd, 0.0f);
    for (int i = 0; i < hd; ++i) {
      const float* row = s.s.data() + static_cast<size_t>(i) * hd;
      Axpy(s.k[t][i], row, ks, hd);
      Axpy(s.q[t][i], row, qs, hd);
    }
  }
}

// Δ by forward substitution, in place of ks (row t needs rows u < t), then the outputs.
void SolveAndOutput(const DeltaNetArgs& a, int h, int r0, int n, int chunk, DeltaChunkScratch& s) {
  const int hd = a.head_dim;
  const size_t k_width = static_cast<size_t>(a.n_k_heads) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int t = 0; t < n; ++t) {
    const size_t r = static_cast<size_t>(r0 + t);
    const float* v = a.qkv + r * a.qkv_stride + 2 * k_width + static_cast<size_t>(h) * hd;
    const float beta = a.beta[r * a.n_v_heads + h];
    const float gamma = std::exp(s.g[t]);
    float* d = s.ks.data() + static_cast<size_t>(t) * hd;
    for (int j = 0; j < hd; ++j) d[j] = beta * (v[j] - gamma * d[j]);
    const float* a_row = s.a.data() + static_cast<size_t>(t) * chunk;
    for (int u = 0; u < t; ++u) Axpy(-a_row[u], s.ks.data() + static_cast<size_t>(u) * hd, d, hd);
    float* out = a.out + (r * a.n_v_heads + h) * hd;
    const float* qs = s.qs.data() + static_cast<size_t>(t) * hd;
    for (int j = 0; j < hd; ++j) out[j] = gamma * qs[j];
    const float* qk_row = s.qk.data() + static_cast<size_t>(t) * chunk;
    for (int u = 0; u <= t; ++u)
      Axpy(qk_row[u], s.ks.data() + static_cast<size_t>(u) * hd, out, hd);
    for (int j = 0; j < hd; ++j) out[j] *= scale;
  }
}

// S = γ_{n-1} S0 + Σ_u exp(G_{n-1} - G_u) k_u Δ_u^T.
void UpdateState(int hd, int n, DeltaChunkScratch& s) {
  const float last = s.g[n - 1];
  const float gamma = std::exp(last);
  float* w = s.qs.data();  // exp(G_{n-1} - G_u); qs is read by now
  for (int u = 0; u < n; ++u) w[u] = std::exp(last - s.g[u]);
  for (int i = 0; i < hd; ++i) {
    float* row = s.s.data() + static_cast<size_t>(i) * hd;
    for (int j = 0; j < hd; ++j) row[j] *= gamma;
    for (int u = 0; u < n; ++u)
      Axpy(w[u] * s.k[u][i], s.ks.data() + static_cast<size_t>(u) * hd, row, hd);
  }
}

}  // namespace

void DeltaRuleChunkedRun(const DeltaNetArgs& a, const float* qk, const RecurrentRun& run, int h,
                         int chunk, DeltaChunkScratch& scratch) {
  const int hd = a.head_dim;
  const size_t head_floats = static_cast<size_t>(hd) * hd;
  Grow(scratch, hd, chunk);
  float* s = scratch.s.data();
  const float* from = run.from != nullptr ? run.from + h * head_floats : nullptr;
  for (int j = 0; j < hd; ++j) {  // s[i][j] = M0[j][i]
    for (int i = 0; i < hd; ++i) {
      s[static_cast<size_t>(i) * hd + j] =
          from != nullptr ? from[static_cast<size_t>(j) * hd + i] : 0.0f;
    }
  }
  for (int r0 = run.row_begin; r0 < run.row_end; r0 += chunk) {
    const int n = std::min(chunk, run.row_end - r0);
    ChunkMatrices(a, qk, h, r0, n, chunk, scratch);
    StateProducts(hd, n, scratch);
    SolveAndOutput(a, h, r0, n, chunk, scratch);
    UpdateState(hd, n, scratch);
  }
  float* to = run.to + h * head_floats;
  for (int j = 0; j < hd; ++j) {
    for (int i = 0; i < hd; ++i)
      to[static_cast<size_t>(j) * hd + i] = s[static_cast<size_t>(i) * hd + j];
  }
}

}  // namespace kvserve
