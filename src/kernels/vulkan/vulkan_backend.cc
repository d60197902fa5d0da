#include "kernels/vulkan/vulkan_backend.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/ops.h"
#include "kernels/quantize.h"
#include "kernels/rope_angles.h"
#include "kernels/vulkan/vulkan_launch.h"
#include "kernels/vulkan/vulkan_shader_args.h"
#include "kernels/vulkan/vulkan_workspace.h"

namespace kvserve {

namespace {

// The matmul shader variant for a weight type, or nullptr (the CPU backend multiplies it).
const char* MatmulShader(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return "matmul_f32";
    case GgmlType::kF16:
      return "matmul_f16";
    case GgmlType::kBF16:
      return "matmul_bf16";
    case GgmlType::kQ8_0:
      return "matmul_q8_0";
    case GgmlType::kQ4_0:
      return "matmul_q4_0";
    case GgmlType::kQ4_1:
      return "matmul_q4_1";
    case GgmlType::kQ5_0:
      return "matmul_q5_0";
    case GgmlType::kQ5_1:
      return "matmul_q5_1";
    case GgmlType::kIQ4_NL:
      return "matmul_iq4_nl";
    case GgmlType::kMXFP4:
      return "matmul_mxfp4";
    case GgmlType::kQ2_K:
      return "matmul_q2_k";
    case GgmlType::kQ3_K:
      return "matmul_q3_k";
    case GgmlType::kQ4_K:
      return "matmul_q4_k";
    case GgmlType::kQ5_K:
      return "matmul_q5_k";
    case GgmlType::kQ6_K:
      return "matmul_q6_k";
    default:
      return nullptr;
  }
}

}  // namespace

std::optional<GgmlType> VulkanBackend::QuantizedInputType(GgmlType weights) {
  if (MatmulShader(weights) == nullptr) return std::nullopt;
  const GgmlType x_type = ActivationTypeFor(weights);  // the CPU backend's own choice
  if (x_type == GgmlType::kF32) return std::nullopt;
  return x_type;
}

// As the CPU backend's matmul rounds x (kernels/cpu/matmul.cc): Q8_0 and Q8_K with its kernel
// table, Q8_1 with the encoder of quantize.h.
void VulkanBackend::QuantizeInput(GgmlType x_type, const float* x, int64_t n, uint8_t* out) const {
  const KernelTable& kernels = cpu->kernels();
  if (x_type == GgmlType::kQ8_K) {
    kernels.quantize_row_q8_k(x, static_cast<int>(n), reinterpret_cast<BlockQ8_K*>(out));
  } else if (x_type == GgmlType::kQ8_0) {
    kernels.quantize_row_q8_0(x, static_cast<int>(n), reinterpret_cast<BlockQ8_0*>(out));
  } else {
    QuantizeRow(x_type, x, n, out);
  }
}

namespace {

// The matrix as the CPU backend reads it: the file's blocks (`packed` is the device copy).
WeightMatrix HostLayout(const WeightMatrix& w) {
  WeightMatrix host = w;
  host.packed = nullptr;
  return host;
}

size_t AlignUp(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

Result<VulkanBackendOptions> VulkanBackendOptions::FromEnvironment() {
  VulkanBackendOptions options;
  if (const char* device = std::getenv("KVSERVE_DEVICE"); device != nullptr && *device) {
    options.device = std::atoi(device);
  }
  if (const char* sync = std::getenv("KVSERVE_VULKAN_SYNC"); sync != nullptr) {
    options.synchronous = std::string_view(sync) == "1";
  }
  if (const char* weights = std::getenv("KVSERVE_VULKAN_WEIGHTS"); weights != nullptr && *weights) {
    const std::string_view place(weights);
    if (place != "device" && place != "mapped") {
      return Status::InvalidArgument("KVSERVE_VULKAN_WEIGHTS: '" + std::string(place) +
                                     "' is not one of device, mapped");
    }
    options.weights_memory =
        place == "device" ? VulkanMemoryKind::kDeviceOnly : VulkanMemoryKind::kMapped;
  }
  return options;
}

Result<std::unique_ptr<Backend>> VulkanBackend::Make(const VulkanBackendOptions& options) {
  Result<std::unique_ptr<VulkanDevice>> device = VulkanDevice::Open(options.device);
  if (!device.ok()) return device.status();
  VulkanBackendParts parts;
  parts.device = std::move(device.value());
  parts.device->set_synchronous(options.synchronous);
  parts.memory = std::make_unique<VulkanMemory>(*parts.device);
  const bool discrete = parts.device->info().type == "discrete";
  parts.weights_memory = options.weights_memory.value_or(discrete ? VulkanMemoryKind::kDeviceOnly
                                                                  : VulkanMemoryKind::kMapped);
  if (parts.weights_memory == VulkanMemoryKind::kDeviceOnly &&
      !parts.device->HasMemory(VulkanMemoryKind::kDeviceOnly)) {
    return Status::Unavailable("Vulkan device " + std::to_string(options.device) +
                               " has no device-local memory for the weights " +
                               "(KVSERVE_VULKAN_WEIGHTS=mapped keeps them in mapped memory)");
  }
  CpuBackendOptions cpu = CpuBackendOptions::FromEnvironment();
  cpu.pack = false;  // the CPU operations read the same GGML blocks the shaders do
  parts.cpu = std::make_unique<CpuBackend>(cpu);
  constexpr size_t kGeluTableBytes = 65536 * sizeof(uint16_t);
  parts.gelu_table = parts.memory->AllocateZeroed(kGeluTableBytes);
  std::memcpy(parts.gelu_table.data(), GeluF16Table(), kGeluTableBytes);
  return std::unique_ptr<Backend>(new VulkanBackend(std::move(parts)));
}

VulkanBackend::VulkanBackend(VulkanBackendParts parts)
    : VulkanBackendParts(std::move(parts)),
      ForwardingBackend(*cpu),
      attention_(*VulkanBackendParts::device, *memory) {}

std::string VulkanBackend::kernel_set() const { return "spirv+" + cpu->kernel_set(); }

std::string VulkanBackend::device() const {
  const VulkanDeviceInfo& info = VulkanBackendParts::device->info();
  return "Vulkan device " + std::to_string(info.index) + ": " + info.name + " (" + info.type +
         ", Vulkan " + info.api_version + "), weights in " +
         (weights_memory == VulkanMemoryKind::kDeviceOnly ? "device-only" : "mapped") + " memory";
}

std::unique_ptr<Workspace> VulkanBackend::NewWorkspace(const WorkspaceOptions& options) const {
  return std::make_unique<VulkanWorkspace>(*memory, *VulkanBackendParts::device,
                                           cpu->NewWorkspace(options));
}

// The CPU backend reads and writes the same memory: the recorded dispatches run first.
Workspace& VulkanBackend::Inner(Workspace& ws) const {
  VulkanBackendParts::device->Flush();
  return Vk(ws).cpu();
}

// Copies every matrix the shaders multiply into one buffer of device memory (of weights_memory's
// kind, through the allocator's CopyFromHost) and every vector into one of mapped memory, each at
// the storage alignment: a matrix's `packed` points at its copy (GGML layout), a vector's
// `prepared` at its copy. `storage` owns both buffers.
size_t VulkanBackend::PrepareWeights(std::span<WeightMatrix* const> matrices,
                                     std::span<WeightVector* const> vectors,
                                     const GgufFile& /*file*/,
                                     std::shared_ptr<uint8_t>& storage) const {
  return CopyWeights(matrices, vectors, storage);
}

size_t VulkanBackend::CopyWeights(std::span<WeightMatrix* const> matrices,
                                  std::span<WeightVector* const> vectors,
                                  std::shared_ptr<uint8_t>& storage) const {
  const size_t alignment = VulkanBackendParts::device->storage_alignment();
  std::vector<WeightMatrix*> copied;
  size_t matrix_bytes = 0;
  size_t vector_bytes = 0;
  for (WeightMatrix* m : matrices) {
    if (m->data == nullptr || m->packed != nullptr || MatmulShader(m->type) == nullptr) continue;
    copied.push_back(m);
    matrix_bytes += AlignUp(m->row_bytes * m->n_out, alignment);
  }
  for (const WeightVector* v : vectors)
    vector_bytes += AlignUp(v->size() * sizeof(float), alignment);
  if (matrix_bytes + vector_bytes == 0) return 0;
  struct Copies {
    Buffer matrices;
    Buffer vectors;
  };
  auto copies = std::make_shared<Copies>();
  if (matrix_bytes > 0) {
    copies->matrices = weights_memory == VulkanMemoryKind::kDeviceOnly
                           ? memory->AllocateDeviceOnly(matrix_bytes)
                           : memory->AllocateZeroed(matrix_bytes);
  }
  if (vector_bytes > 0) copies->vectors = memory->AllocateZeroed(vector_bytes);
  uint8_t* next = copies->matrices.data();
  for (WeightMatrix* m : copied) {
    memory->CopyFromHost(m->data, m->row_bytes * m->n_out, next);
    m->packed = next;
    next += AlignUp(m->row_bytes * m->n_out, alignment);
  }
  next = copies->vectors.data();
  for (WeightVector* v : vectors) {
    std::memcpy(next, v->host.data(), v->size() * sizeof(float));
    v->prepared = reinterpret_cast<const float*>(next);
    next += AlignUp(v->size() * sizeof(float), alignment);
  }
  uint8_t* first = matrix_bytes > 0 ? copies->matrices.data() : copies->vectors.data();
  storage = std::shared_ptr<uint8_t>(copies, first);  // aliases the buffers' owner
  return matrix_bytes + vector_bytes;
}

void VulkanBackend::Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
                           Workspace& ws) const {
  const WeightMatrix* one[] = {&w};
  float* const ys[] = {y};
  MatmulSameInput(one, x, n_rows, ys, ws);
}

// The quantized types read x rounded to 8 bits (QuantizeMatmulInput: on the device, with the CPU
// backend's quantizer's bytes), once per activation type for all the matrices.
void VulkanBackend::MatmulSameInput(std::span<const WeightMatrix* const> matrices, const float* x,
                                    int n_rows, std::span<float* const> ys, Workspace& ws) const {
  VulkanWorkspace& vk = Vk(ws);
  vk.BeginOperation(VulkanBackendParts::device->completed());
  MatmulInput rounded;  // x as the last quantized matrix read it
  for (size_t i = 0; i < matrices.size(); ++i) {
    const WeightMatrix& w = *matrices[i];
    if (MatmulShader(w.type) == nullptr || w.packed == nullptr) {
      inner_.Matmul(HostLayout(w), x, n_rows, ys[i], Inner(ws));
      continue;
    }
    MatmulInput input{.data = x, .row_bytes = sizeof(float) * w.n_in};
    const std::optional<GgmlType> x_type = QuantizedInputType(w.type);
    if (x_type.has_value()) {
      if (rounded.type != x_type) rounded = QuantizeMatmulInput(*x_type, x, n_rows, w.n_in, vk);
      input = rounded;
    }
    if (!DispatchMatmul(w, input, n_rows, ys[i], vk)) {
      inner_.Matmul(HostLayout(w), x, n_rows, ys[i], Inner(ws));
    }
  }
}

VulkanBackend::MatmulInput VulkanBackend::QuantizeMatmulInput(GgmlType x_type, const float* x,
                                                              int n_rows, int64_t n_in,
                                                              VulkanWorkspace& ws) const {
  const size_t row_bytes = RowBytes(x_type, n_in);
  uint8_t* xq = ws.Transient(row_bytes * n_rows + 4);  // the shader may write a half word past
  if (!QuantizeOnDevice(x_type, x, static_cast<int64_t>(n_rows) * n_in, xq, ws)) {
    VulkanBackendParts::device->Flush();  // x may be what a recorded dispatch writes
    for (int r = 0; r < n_rows; ++r) {
      QuantizeInput(x_type, x + static_cast<size_t>(r) * n_in, n_in, xq + r * row_bytes);
    }
  }
  return {.data = xq, .row_bytes = row_bytes, .type = x_type};
}

bool VulkanBackend::QuantizeOnDevice(GgmlType x_type, const float* x, int64_t n, uint8_t* out,
                                     VulkanWorkspace& ws) const {
  const char* shader = x_type == GgmlType::kQ8_0   ? "quantize_q8_0"
                       : x_type == GgmlType::kQ8_1 ? "quantize_q8_1"
                       : x_type == GgmlType::kQ8_K ? "quantize_q8_k"
                                                   : nullptr;
  const int64_t block = TraitsOf(x_type).block_elements;
  if (shader == nullptr || n % block != 0) return false;
  const uint64_t n_blocks = static_cast<uint64_t>(n / block);
  const size_t bytes = RowBytes(x_type, n);
  VulkanShaderArgs args(*memory, ws, *VulkanBackendParts::device, VulkanShaderArgs::kContinues);
  const uint32_t x_word = args.Input(x, sizeof(float) * n);
  const uint32_t out_word = args.Output(out, (bytes + 3) / 4 * 4 + 4);
  if (!args.fits() || n_blocks >= (uint64_t{1} << 32)) return false;
  // Q8_0: a thread per pair of blocks (its 68 bytes are whole words).
  const uint64_t threads = x_type == GgmlType::kQ8_0 ? (n_blocks + 1) / 2 : n_blocks;
  const VulkanGroups grid = VulkanGroups::Cover((threads + 63) / 64);
  const std::array<uint32_t, 4> push = {PushInt(n_blocks), x_word, out_word, grid.x};
  args.Dispatch(shader, PushBytes(push), grid.x, grid.y, 1);
  return true;
}

bool VulkanBackend::DispatchMatmul(const WeightMatrix& w, const MatmulInput& x, int n_rows,
                                   float* y, VulkanWorkspace& ws) const {
  VulkanShaderArgs args(*memory, ws, *VulkanBackendParts::device, VulkanShaderArgs::kContinues);
  const uint32_t w_byte = args.InputBytes(w.packed, w.row_bytes * w.n_out);
  // Float x by words, quantized x by bytes (its blocks need not start on a word).
  const uint32_t x_start = x.type.has_value() ? args.InputBytes(x.data, x.row_bytes * n_rows)
                                              : args.Input(x.data, x.row_bytes * n_rows);
  const uint32_t y_word = args.Output(y, sizeof(float) * n_rows * w.n_out);
  if (!args.fits()) return false;
  const VulkanGroups grid = VulkanGroups::Cover(w.n_out);
  const std::array<uint32_t, 8> push = {PushInt(w.n_out),
                                        PushInt(w.n_in),
                                        PushInt(w.row_bytes),
                                        w_byte,
                                        x_start,
                                        y_word,
                                        grid.x,
                                        PushInt(x.type.has_value() ? x.row_bytes : 0)};
  args.Dispatch(MatmulShader(w.type), PushBytes(push), grid.x, grid.y, PushInt(n_rows));
  return true;
}

void VulkanBackend::GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
                            Workspace& ws) const {
  inner_.GetRows(HostLayout(table), rows, out, Inner(ws));
}

// The angles on the host (rope_angles.h, the CPU's own bits), the rotations on the device.
void VulkanBackend::Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
                         const RopeParams& rope, Workspace& ws) const {
  const int n_rows = static_cast<int>(positions.size());
  const int half = rope.rope_dims / 2;
  VulkanWorkspace& vk = Vk(ws);
  VulkanShaderArgs args(*memory, vk, *VulkanBackendParts::device);
  float* cos_sin = reinterpret_cast<float*>(vk.Transient(sizeof(float) * n_rows * half * 2));
  for (int r = 0; r < n_rows; ++r) RopeCosSin(rope, positions[r], cos_sin + 2 * r * half);
  const uint32_t x_word = args.Output(x, sizeof(float) * n_rows * n_heads * head_dim);
  const uint32_t cs_word = args.Input(cos_sin, sizeof(float) * n_rows * half * 2);
  const uint64_t pairs = static_cast<uint64_t>(n_rows) * n_heads * half;
  const VulkanGroups grid = VulkanGroups::Cover((pairs + 63) / 64);
  const std::array<uint32_t, 8> push = {PushInt(pairs),
                                        PushInt(n_heads),
                                        PushInt(head_dim),
                                        PushInt(rope.rope_dims),
                                        rope.mode == RopeMode::kSplitHalves ? 1u : 0u,
                                        x_word,
                                        cs_word,
                                        grid.x};
  if (!args.fits()) {
    return inner_.Rope(x, positions, n_heads, head_dim, rope, Inner(ws));
  }
  args.Dispatch("rope", PushBytes(push), grid.x, grid.y, 1);
}

// KV types, head sizes and memory the shaders do not take run on the CPU backend
// (VulkanAttention says which).
void VulkanBackend::StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
                            const float* v, size_t stride, Workspace& ws) const {
  if (!attention_.StoreKv(kv, slots, k, v, stride, Vk(ws))) {
    inner_.StoreKv(kv, slots, k, v, stride, Inner(ws));
  }
}

void VulkanBackend::PagedAttention(const KvLayerView& kv, const AttentionBatch& batch,
                                   const float* q, int n_heads, const AttentionParams& params,
                                   float* out, Workspace& ws) const {
  if (!attention_.PagedAttention(kv, batch, q, n_heads, params, out, Vk(ws))) {
    inner_.PagedAttention(kv, batch, q, n_heads, params, out, Inner(ws));
  }
}

}  // namespace kvserve
