// A Backend that runs every operation on another one and keeps, per operation, how many times it
// ran, how long it took on the calling thread (wall time, including the hand-offs to worker
// threads), how long the caller then waited for its workers, for matmuls the weight bytes read,
// and on a device backend the dispatches recorded and the waits for the device. Behind `kvserve
// bench --profile`: a decode step's time, op by op.
//
// Matmuls are kept apart by weight type and shape ("matmul q4_K 2048x5632"), the rest by name.
// Thread rules: as a Backend (one forward pass at a time per workspace); totals() and Reset()
// between passes, from the thread that runs them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/forwarding_backend.h"

namespace kvserve {

// The operations are timed; the rest (name, allocator, PrepareWeights, the self-checks) pass
// straight through (ForwardingBackend).
class ProfilingBackend final : public ForwardingBackend {
 public:
  explicit ProfilingBackend(const Backend& inner) : ForwardingBackend(inner) {}

  struct OpTotals {
    std::string name;
    uint64_t calls = 0;
    double seconds = 0;       // wall time on the calling thread
    double wait_seconds = 0;  // of which the caller waited for workers after its own part
    uint64_t parallel_jobs = 0;
    uint64_t worker_sleeps = 0;
    uint64_t weight_bytes = 0;  // matmuls: stored bytes of the weights read
    // attention: bytes of the K and V rows read, each KV head's once per token (its query heads
    // share them)
    uint64_t kv_bytes = 0;
    // A device backend's (Workspace::Counters); the time of a batch of recorded dispatches falls
    // on the op that waits for it.
    uint64_t device_dispatches = 0;
    uint64_t device_waits = 0;
  };
  // Every op seen since the last Reset, the slowest first.
  std::vector<OpTotals> totals() const;
  void Reset() { ops_.clear(); }

  void Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
              Workspace& ws) const override;
  // Timed as one op named by every matrix: "matmul Q4_K 2048x2048 + Q4_K 256x2048 + ...".
  void MatmulSameInput(std::span<const WeightMatrix* const> matrices, const float* x, int n_rows,
                       std::span<float* const> ys, Workspace& ws) const override;
  void GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
               Workspace& ws) const override;
  void GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows, int width,
                  float* dst, Workspace& ws) const override;
  void CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                Workspace& ws) const override;
  void Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const override;
  void AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
               Workspace& ws) const override;
  void RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps, float* out,
               Workspace& ws) const override;
  void LayerNorm(const float* x, const float* weight, const float* bias, int n_rows, int width,
                 float eps, float* out, Workspace& ws) const override;
  void Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
            const RopeParams& rope, Workspace& ws) const override;
  void SwiGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override;
  void SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha, float limit,
                 Workspace& ws) const override;
  void Gelu(float* x, int n_rows, int width, Workspace& ws) const override;
  void Relu(float* x, int n_rows, int width, Workspace& ws) const override;
  void GeGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override;
  void Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const override;
  void SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const override;
  void StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
               const float* v, size_t stride, Workspace& ws) const override;
  void PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                      int n_heads, const AttentionParams& params, float* out,
                      Workspace& ws) const override;
  void RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids, float* weights,
                 Workspace& ws) const override;
  void GroupByExpert(std::span<const int32_t> ids, int k, int n_expert,
                     ExpertGroups& groups) const override;
  void ScatterRows(const float* src, int width, std::span<const int32_t> rows, size_t dst_stride,
                   float* dst, Workspace& ws) const override;
  void AddWeightedRows(float* x, const float* src, const float* weights, int n_rows, int k,
                       int width, Workspace& ws) const override;
  void ShortConv(const float* x, size_t x_stride, int channels, const float* weight, int kernel,
                 std::span<const RecurrentRun> runs, float* out, Workspace& ws) const override;
  void GatedDeltaNet(const float* qkv, size_t qkv_stride, const float* g, const float* beta,
                     int n_k_heads, int n_v_heads, int head_dim, float eps,
                     std::span<const RecurrentRun> runs, float* out, Workspace& ws) const override;
  void DeltaNetGates(const float* alpha, const float* beta_in, const float* dt_bias, const float* a,
                     int n_rows, int n_heads, float* g, float* beta, Workspace& ws) const override;
  void SigmoidGate(float* x, const float* gate, size_t gate_stride, int n_rows, int width,
                   Workspace& ws) const override;
  void SigmoidScaleRows(float* x, const float* gate, int n_rows, int width,
                        Workspace& ws) const override;

 private:
  // Runs fn() and adds its time (and, with a workspace, its workers' counters) to op `name`.
  template <typename Fn>
  void Timed(const std::string& name, Workspace* ws, uint64_t weight_bytes, Fn&& fn) const;

  // Written by the const operations: a profile is state of the run, not of the backend.
  mutable std::map<std::string, OpTotals> ops_;
};

}  // namespace kvserve
