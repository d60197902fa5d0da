// The chunked (WY / UT-transform) form of the gated delta rule, for prefill:
// Backend::GatedDeltaNet's recurrence over a chunk of C rows at once, as in the Gated DeltaNet
// paper (Yang et al. 2024) and flash-linear-attention's chunk_gated_delta_rule. Opt-in
// (CpuBackendOptions::delta_chunk, KVSERVE_DELTA_CHUNK): it equals the token-by-token form only
// within float rounding, and its bits depend on where the chunks start, so it would break the
// prefix cache's cached == uncached bit for bit (docs/kv-cache.md). Results never depend on the
// thread split: a head is computed by one task.
//
// In the paper's layout S = M^T ([key i][value j]); per chunk, with rows t = 0..n-1, G_t the sum
// of g over rows 0..t of the chunk, γ_t = exp(G_t), and S0 the state before the chunk, the
// token-by-token recurrence unrolls to
//   Δ_t + β_t Σ_{s<t} exp(G_t - G_s) (k_t·k_s) Δ_s = β_t (v_t - γ_t S0^T k_t)     (forward subst.)
//   out_t = scale (γ_t S0^T q_t + Σ_{s<=t} exp(G_t - G_s) (q_t·k_s) Δ_s)
//   S_n   = γ_{n-1} S0 + Σ_s exp(G_{n-1} - G_s) k_s Δ_s^T
// where Δ_s is the row's delta (v - kv_mem) * beta. Cost per chunk and head: 3 n d² for the
// products with the state and ~2 n² d within the chunk, against ~4 n d² token by token.
#pragma once

#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/recurrent_ops.h"

namespace kvserve {

// The largest chunk KVSERVE_DELTA_CHUNK takes (the scratch grows as chunk² + 3 chunk head_dim).
constexpr int kMaxDeltaChunk = 1024;

// One task's scratch for DeltaRuleChunkedRun, grown on first use. Floats, d = head_dim, C = chunk.
struct DeltaChunkScratch {
  std::vector<float> ks;  // [C, d], S0^T k_t, then the right-hand side, then Δ
  std::vector<float> qs;  // [C, d], S0^T q_t
  std::vector<float> kt;  // [d (key i), C], k_u[i]
  std::vector<float> dt;  // [d, C], q_t[i], then Δ_u[j]
  std::vector<float> wk;  // [d, C], M q_t, M k_t; then [C, d], exp(G_{n-1} - G_u) k_u[i]
  std::vector<float> a;   // [C, C], -β_t exp(G_t - G_s) (k_t·k_s), s < t
  std::vector<float> qk;  // [C, C], exp(G_t - G_s) (q_t·k_s), s <= t
  std::vector<float> g;   // [C], G_t
};

// Value head h of one run (DeltaRuleRun's contract: reads run.from, or zeros; writes run.to; from
// == to in place), in chunks of `chunk` rows from the run's first row (the last one shorter).
// `qk`: the normalized q and k, [n_rows, 2, n_k_heads, head_dim] (GatedDeltaNetRuns' phase 1).
// The products run through kernels.mat_acc (each table within rounding of the plain one).
void DeltaRuleChunkedRun(const DeltaNetArgs& a, const KernelTable& kernels, const float* qk,
                         const RecurrentRun& run, int h, int chunk, DeltaChunkScratch& scratch);

}  // namespace kvserve
