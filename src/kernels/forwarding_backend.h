// A Backend that hands every call to another one: the base of backends that change one thing
// and must otherwise give the inner backend's bits (ProfilingBackend times the operations; the
// tests' backends keep the weights elsewhere). The inner backend must outlive it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace kvserve {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(const Backend& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  std::string kernel_set() const override { return inner_.kernel_set(); }
  std::string device() const override { return inner_.device(); }
  std::string TuningReport() const override { return inner_.TuningReport(); }
  BufferAllocator& allocator() const override { return inner_.allocator(); }
  std::unique_ptr<Workspace> NewWorkspace(const WorkspaceOptions& options) const override {
    return inner_.NewWorkspace(options);
  }
  size_t PrepareWeights(std::span<WeightMatrix* const> matrices,
                        std::span<WeightVector* const> vectors, const GgufFile& file,
                        std::shared_ptr<uint8_t>& storage) const override {
    return inner_.PrepareWeights(matrices, vectors, file, storage);
  }
  void Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
              Workspace& ws) const override {
    inner_.Matmul(w, x, n_rows, y, Inner(ws));
  }
  // MatmulSameInput is not forwarded: Backend's runs this->Matmul per matrix, so a subclass that
  // changes Matmul (the Vulkan backend's device weights) keeps it; one that changes nothing there
  // forwards it itself (ProfilingBackend).
  void GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
               Workspace& ws) const override {
    inner_.GetRows(table, rows, out, Inner(ws));
  }
  void GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows, int width,
                  float* dst, Workspace& ws) const override {
    inner_.GatherRows(src, src_stride, rows, width, dst, Inner(ws));
  }
  void CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                Workspace& ws) const override {
    inner_.CopyRows(src, src_stride, n_rows, width, dst, Inner(ws));
  }
  void Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const override {
    inner_.Add(x, y, n_rows, width, Inner(ws));
  }
  void AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
               Workspace& ws) const override {
    inner_.AddBias(x, stride, bias, n_rows, width, Inner(ws));
  }
  void RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps, float* out,
               Workspace& ws) const override {
    inner_.RmsNorm(x, weight, n_rows, width, eps, out, Inner(ws));
  }
  void LayerNorm(const float* x, const float* weight, const float* bias, int n_rows, int width,
                 float eps, float* out, Workspace& ws) const override {
    inner_.LayerNorm(x, weight, bias, n_rows, width, eps, out, Inner(ws));
  }
  void Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
            const RopeParams& rope, Workspace& ws) const override {
    inner_.Rope(x, positions, n_heads, head_dim, rope, Inner(ws));
  }
  void SwiGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override {
    inner_.SwiGlu(gate, up, n_rows, width, Inner(ws));
  }
  void SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha, float limit,
                 Workspace& ws) const override {
    inner_.SwiGluOai(gate, up, n_rows, width, alpha, limit, Inner(ws));
  }
  void Gelu(float* x, int n_rows, int width, Workspace& ws) const override {
    inner_.Gelu(x, n_rows, width, Inner(ws));
  }
  void Relu(float* x, int n_rows, int width, Workspace& ws) const override {
    inner_.Relu(x, n_rows, width, Inner(ws));
  }
  void GeGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override {
    inner_.GeGlu(gate, up, n_rows, width, Inner(ws));
  }
  void Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const override {
    inner_.Scale(x, n_rows, width, factor, Inner(ws));
  }
  void SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const override {
    inner_.SoftCap(x, n_rows, width, cap, Inner(ws));
  }
  void StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
               const float* v, size_t stride, Workspace& ws) const override {
    inner_.StoreKv(kv, slots, k, v, stride, Inner(ws));
  }
  void PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                      int n_heads, const AttentionParams& params, float* out,
                      Workspace& ws) const override {
    inner_.PagedAttention(kv, batch, q, n_heads, params, out, Inner(ws));
  }
  void RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids, float* weights,
                 Workspace& ws) const override {
    inner_.RouteTopK(logits, n_rows, n_expert, k, ids, weights, Inner(ws));
  }
  void GroupByExpert(std::span<const int32_t> ids, int k, int n_expert,
                     ExpertGroups& groups) const override {
    inner_.GroupByExpert(ids, k, n_expert, groups);
  }
  void ScatterRows(const float* src, int width, std::span<const int32_t> rows, size_t dst_stride,
                   float* dst, Workspace& ws) const override {
    inner_.ScatterRows(src, width, rows, dst_stride, dst, Inner(ws));
  }
  void AddWeightedRows(float* x, const float* src, const float* weights, int n_rows, int k,
                       int width, Workspace& ws) const override {
    inner_.AddWeightedRows(x, src, weights, n_rows, k, width, Inner(ws));
  }
  void ShortConv(const float* x, size_t x_stride, int channels, const float* weight, int kernel,
                 std::span<const RecurrentRun> runs, float* out, Workspace& ws) const override {
    inner_.ShortConv(x, x_stride, channels, weight, kernel, runs, out, Inner(ws));
  }
  void GatedDeltaNet(const float* qkv, size_t qkv_stride, const float* g, const float* beta,
                     int n_k_heads, int n_v_heads, int head_dim, float eps,
                     std::span<const RecurrentRun> runs, float* out, Workspace& ws) const override {
    inner_.GatedDeltaNet(qkv, qkv_stride, g, beta, n_k_heads, n_v_heads, head_dim, eps, runs, out,
                         Inner(ws));
  }
  void DeltaNetGates(const float* alpha, const float* beta_in, const float* dt_bias, const float* a,
                     int n_rows, int n_heads, float* g, float* beta, Workspace& ws) const override {
    inner_.DeltaNetGates(alpha, beta_in, dt_bias, a, n_rows, n_heads, g, beta, Inner(ws));
  }
  void SigmoidGate(float* x, const float* gate, size_t gate_stride, int n_rows, int width,
                   Workspace& ws) const override {
    inner_.SigmoidGate(x, gate, gate_stride, n_rows, width, Inner(ws));
  }
  void SigmoidScaleRows(float* x, const float* gate, int n_rows, int width,
                        Workspace& ws) const override {
    inner_.SigmoidScaleRows(x, gate, n_rows, width, Inner(ws));
  }
  Measurement MeasureReadBandwidth(uint64_t bytes, int repeats, Workspace& ws) const override {
    return inner_.MeasureReadBandwidth(bytes, repeats, Inner(ws));
  }
  Measurement MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in, int repeats,
                                 Workspace& ws) const override {
    return inner_.MeasureMatmulFlops(type, m, n_out, n_in, repeats, Inner(ws));
  }
  std::vector<KernelCheck> CheckKernels() const override { return inner_.CheckKernels(); }

 protected:
  // The workspace the inner backend gets: `ws` itself, unless the forwarding backend made its own
  // workspace around one of the inner backend's (NewWorkspace).
  virtual Workspace& Inner(Workspace& ws) const { return ws; }

  const Backend& inner_;
};

}  // namespace kvserve
