// The CPU backend: the per-ISA kernel tables (one chosen at construction), a thread pool per
// workspace, and the repacking of weights at load (packed_weights.h). Immutable after
// construction but for the decode tile choice (decode_tile_chooser.h, thread-safe, invisible in
// the results); any number of workspaces (runners) can use one backend at a time.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/decode_tile_chooser.h"
#include "kernels/cpu/kernels.h"

namespace kvserve {

struct CpuBackendOptions {
  std::string isa;   // "" = the best this CPU has; else scalar|avx2|avxvnni|avx512 at most
  bool pack = true;  // repack Q8_0/Q4_0 into the x16 layout at load (same bits; faster)
  // The packed K-quants' tile at decode (decode_tile_chooser.h): "" (timed on the first decode
  // matmuls), "first" or "alt". Same bits either way.
  std::string decode_tile;
  // GatedDeltaNet's chunked form (delta_chunked.h) for runs of at least this many rows, in chunks
  // of this many; 0 = off (the default): token by token, the bits the prefix cache promises.
  int delta_chunk = 0;

  // KVSERVE_ISA=scalar|avx2|avxvnni|avx512 caps the table, KVSERVE_PACK=0 turns packing off,
  // KVSERVE_DECODE_TILE=auto|first|alt sets decode_tile, KVSERVE_DELTA_CHUNK=n sets delta_chunk.
  // Called by entry points only (the CLI at start-up, the tests' support): nothing below them
  // reads the environment.
  static CpuBackendOptions FromEnvironment();
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {});

  const KernelTable& kernels() const { return kernels_; }
  std::string name() const override;
  std::string kernel_set() const override;
  std::string device() const override;
  // Which decode tiles were tried and kept so far (DecodeTileChooser::Describe).
  std::string TuningReport() const override { return decode_tiles_.Describe(); }
  BufferAllocator& allocator() const override { return allocator_; }
  std::unique_ptr<Workspace> NewWorkspace(const WorkspaceOptions& options) const override;
  // Packs the matrices (packed_weights.h); the vectors stay on the host where they were loaded.
  size_t PrepareWeights(std::span<WeightMatrix* const> matrices,
                        std::span<WeightVector* const> vectors, const GgufFile& file,
                        std::shared_ptr<uint8_t>& storage) const override;

  void Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
              Workspace& ws) const override;
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

  Measurement MeasureReadBandwidth(uint64_t bytes, int repeats, Workspace& ws) const override;
  Measurement MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in, int repeats,
                                 Workspace& ws) const override;
  std::vector<KernelCheck> CheckKernels() const override;

 private:
  const KernelTable& kernels_;
  bool pack_;
  int delta_chunk_;  // CpuBackendOptions::delta_chunk
  mutable HostAllocator allocator_;
  mutable DecodeTileChooser decode_tiles_;  // thread-safe: the runners share it
};

}  // namespace kvserve
