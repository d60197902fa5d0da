// The Vulkan compute backend (`--backend vulkan`): the operations it has shaders for run on a
// Vulkan device, recorded one after another into a batch that runs when the host needs a result
// (VulkanDevice::Flush): before an operation runs on the CPU backend, when an output is plain
// host memory (the logits), and before the memory's own copies and frees. The other operations
// run on the CPU backend on the same memory, which is host-visible device memory
// (vulkan_memory.h). What runs where: VulkanBackend::kDeviceOperations (docs/architecture.md).
// Weights are copied into device memory at load (PrepareWeights) in their GGML layout; x is
// rounded to 8 bits for the quantized types on the device (quantize_rows.comp). The KV pools
// come from allocator() too, so StoreKv and PagedAttention (vulkan_attention.h) write and read
// them in place.
// Every shader reduces in an order fixed per output element whatever the batch, so a token's
// results are the same bits alone, batched and after a prefix hit.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/forwarding_backend.h"
#include "kernels/vulkan/vulkan_attention.h"
#include "kernels/vulkan/vulkan_device.h"
#include "kernels/vulkan/vulkan_memory.h"

namespace kvserve {

struct VulkanBackendOptions {
  int device = 0;  // index into VulkanDevice::List()
  // Each dispatch submitted and waited for on its own (VulkanDevice::set_synchronous).
  bool synchronous = false;
  // Where PrepareWeights puts the matrices: device-only memory (uploaded through a staging
  // buffer) on a discrete GPU, whose mapped device memory may be a 256 MiB window; mapped memory
  // elsewhere (lavapipe, integrated GPUs: the same memory either way). Set, it overrides that.
  std::optional<VulkanMemoryKind> weights_memory;
  // KVSERVE_DEVICE=N picks the device (the CLI's --device sets it); KVSERVE_VULKAN_SYNC=1 makes
  // it synchronous; KVSERVE_VULKAN_WEIGHTS=device|mapped sets weights_memory.
  static Result<VulkanBackendOptions> FromEnvironment();
};

// What the backend owns, constructed before the ForwardingBackend base that refers to `cpu`.
struct VulkanBackendParts {
  std::unique_ptr<VulkanDevice> device;
  std::unique_ptr<VulkanMemory> memory;
  std::unique_ptr<CpuBackend> cpu;  // unpacked weights: it reads the same GGML blocks
  Buffer gelu_table;  // the CPU's GELU table (65536 f16 values) in device memory: the same bits
  VulkanMemoryKind weights_memory = VulkanMemoryKind::kMapped;  // the matrices' (PrepareWeights)
};

class VulkanBackend final : private VulkanBackendParts, public ForwardingBackend {
 public:
  // The operations with shaders, for doctor and the docs.
  static constexpr const char* kDeviceOperations =
      "Matmul (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, "
      "Q5_K, Q6_K), RmsNorm, LayerNorm, Add, AddBias, Scale, SwiGlu, SwiGluOai, Gelu, GeGlu, "
      "Relu, SoftCap, GatherRows, CopyRows, ScatterRows, RouteTopK, AddWeightedRows, Rope, "
      "StoreKv, "
      "PagedAttention (every KV type; "
      "head_dim a multiple of 4 up to 256), x rounded to Q8_0, Q8_1, Q8_K";

  static Result<std::unique_ptr<Backend>> Make(const VulkanBackendOptions& options);

  // What x is rounded to before a matmul of `weights` on the device: the CPU backend's choice
  // (ActivationTypeFor), so the results differ from the CPU's by float summation order alone:
  // Q8_0 for Q8_0, Q4_0, Q5_0, IQ4_NL and MXFP4, Q8_1 for Q4_1 and Q5_1, Q8_K for the K-quants;
  // none (f32) for the float types and the types without a shader.
  static std::optional<GgmlType> QuantizedInputType(GgmlType weights);
  // Rounds a row of n floats to `x_type` (Q8_0, Q8_1 or Q8_K) with the CPU backend's own
  // quantizer (Q8_0 and Q8_K round to nearest even; ggml's reference encoder rounds ties away
  // from zero).
  void QuantizeInput(GgmlType x_type, const float* x, int64_t n, uint8_t* out) const;

  // "vulkan-spirv+avx512": the shaders, and the CPU kernel table for the other operations.
  std::string name() const override { return "vulkan-" + kernel_set(); }
  std::string kernel_set() const override;
  std::string device() const override;
  BufferAllocator& allocator() const override { return *memory; }
  std::unique_ptr<Workspace> NewWorkspace(const WorkspaceOptions& options) const override;
  size_t PrepareWeights(std::span<WeightMatrix* const> matrices,
                        std::span<WeightVector* const> vectors, const GgufFile& file,
                        std::shared_ptr<uint8_t>& storage) const override;

  void Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
              Workspace& ws) const override;
  void MatmulSameInput(std::span<const WeightMatrix* const> matrices, const float* x, int n_rows,
                       std::span<float* const> ys, Workspace& ws) const override;
  // vulkan_row_ops.cc: copy_rows.comp (negative row indices and arguments past one binding go to
  // the CPU backend).
  void GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows, int width,
                  float* dst, Workspace& ws) const override;
  void CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                Workspace& ws) const override;
  void ScatterRows(const float* src, int width, std::span<const int32_t> rows, size_t dst_stride,
                   float* dst, Workspace& ws) const override;
  void GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
               Workspace& ws) const override;
  // vulkan_row_ops.cc: elementwise operations and norms.
  void Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const override;
  void AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
               Workspace& ws) const override;
  void RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps, float* out,
               Workspace& ws) const override;
  void LayerNorm(const float* x, const float* weight, const float* bias, int n_rows, int width,
                 float eps, float* out, Workspace& ws) const override;
  void Gelu(float* x, int n_rows, int width, Workspace& ws) const override;
  void GeGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override;
  void Relu(float* x, int n_rows, int width, Workspace& ws) const override;
  void SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const override;
  void SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha, float limit,
                 Workspace& ws) const override;
  // A mixture's routing (route_topk.comp): the CPU's ids, weights within float rounding; a row
  // whose logits the shader cannot rank as the CPU's double softmax does (near ties, spreads past
  // 600, infinities or NaN) is routed on the CPU backend.
  void RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids, float* weights,
                 Workspace& ws) const override;
  // A mixture's expert outputs summed into x (the grouping stays on the host).
  void AddWeightedRows(float* x, const float* src, const float* weights, int n_rows, int k,
                       int width, Workspace& ws) const override;
  void SwiGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const override;
  void Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const override;

  void Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
            const RopeParams& rope, Workspace& ws) const override;
  void StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
               const float* v, size_t stride, Workspace& ws) const override;
  void PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                      int n_heads, const AttentionParams& params, float* out,
                      Workspace& ws) const override;

  // vulkan_self_test.cc: the shaders against exact sums, and their rate on the device.
  std::vector<KernelCheck> CheckKernels() const override;
  Measurement MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in, int repeats,
                                 Workspace& ws) const override;

 private:
  explicit VulkanBackend(VulkanBackendParts parts);
  // The CPU backend's workspace, once the recorded dispatches have run (it reads their results).
  Workspace& Inner(Workspace& ws) const override;

  // A matmul's x as its shader reads it: x itself (float types), or x rounded to `type` in the
  // workspace's transient memory. row_bytes: one row's bytes.
  struct MatmulInput {
    const void* data = nullptr;
    size_t row_bytes = 0;
    std::optional<GgmlType> type;
  };
  MatmulInput QuantizeMatmulInput(GgmlType x_type, const float* x, int n_rows, int64_t n_in,
                                  VulkanWorkspace& ws) const;
  // Records quantize_rows.comp, which writes x[n] rounded to `x_type` (Q8_0, Q8_1, Q8_K) into
  // out with QuantizeInput's bytes; false (nothing recorded) for another type or an x wider
  // than one binding may span, where the host rounds it (after a wait).
  bool QuantizeOnDevice(GgmlType x_type, const float* x, int64_t n, uint8_t* out,
                        VulkanWorkspace& ws) const;
  // vulkan_self_test.cc: quantize_rows.comp's bytes against QuantizeInput's.
  std::vector<KernelCheck> CheckQuantizeShaders() const;
  // Records w's matmul shader over x; false (nothing recorded) when an argument is wider than
  // one binding may span.
  bool DispatchMatmul(const WeightMatrix& w, const MatmulInput& x, int n_rows, float* y,
                      VulkanWorkspace& ws) const;
  // PrepareWeights without a file: copies the matrices with shaders and every vector.
  size_t CopyWeights(std::span<WeightMatrix* const> matrices,
                     std::span<WeightVector* const> vectors,
                     std::shared_ptr<uint8_t>& storage) const;

  // Runs elementwise.comp's `shader` over x[n_rows][width] (rows x_stride floats apart) with y
  // (y_floats floats; x itself when the shader reads no y), `factor` and `limit`; false (nothing
  // done) when an argument is wider than one binding may span.
  bool Elementwise(const char* shader, float* x, size_t x_stride, const float* y, size_t y_floats,
                   int n_rows, int width, float factor, float limit, Workspace& ws) const;
  // A row move of copy_rows.comp: dst row d(r) = src row s(r) for r < n_rows, with s(r) =
  // rows[r] (kGather) or r, d(r) = rows[r] (kScatter) or r.
  struct RowMove {
    enum Mode { kCopy = 0, kGather = 1, kScatter = 2 } mode = kCopy;
    const float* src = nullptr;
    size_t src_stride = 0;  // floats between src rows
    float* dst = nullptr;
    size_t dst_stride = 0;
    std::span<const int32_t> rows;
    int n_rows = 0;
    int width = 0;
  };
  // Records it; false (nothing recorded) for a negative index or an argument wider than one
  // binding may span.
  bool MoveRows(const RowMove& move, Workspace& ws) const;
  // gelu.comp's `shader` over x[n] with y (GeGLU's up; x for GELU); false as above.
  bool GeluShader(const char* shader, float* x, const float* y, uint64_t n, Workspace& ws) const;

  VulkanAttention attention_;
};

}  // namespace kvserve
