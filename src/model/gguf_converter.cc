#include "model/gguf_converter.h"

#include <algorithm>
#include <cmath>

#include "kernels/quantize.h"

namespace kvserve {

namespace {

// The recipes' view of a model: layers, heads per key/value head and experts, from the
// architecture's keys (a missing or unreadable key leaves the default).
QuantModelShape ShapeOf(const GgufFile& source) {
  QuantModelShape shape;
  auto arch = source.GetString("general.architecture");
  if (!arch.ok()) return shape;
  const std::string p = std::string(*arch) + ".";
  const auto get = [&](const std::string& key, uint64_t fallback) {
    auto value = source.GetUintOr(p + key, fallback);
    return static_cast<int>(std::min<uint64_t>(value.ok() ? *value : fallback, 1 << 16));
  };
  shape.n_layers = get("block_count", 0);
  const int n_heads = get("attention.head_count", 0);
  const int n_kv_heads = get("attention.head_count_kv", static_cast<uint64_t>(n_heads));
  if (n_heads > 0 && n_kv_heads > 0) shape.n_gqa = n_heads / n_kv_heads;
  shape.n_expert = get("expert_count", 0);
  return shape;
}

constexpr const char* kTargetTypes =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_k, q3_k, q4_k, q5_k, q6_k";
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

bool IsBlockType(GgmlType type) { return TraitsOf(type).block_elements > 1; }

}  // namespace

Result<uint32_t> LlamaFileType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 0u;
    case GgmlType::kF16:
      return 1u;
    case GgmlType::kQ4_0:
      return 2u;
    case GgmlType::kQ8_0:
      return 7u;
    case GgmlType::kBF16:
      return 32u;
    // llama_ftype: one type for every matrix is closest to the _S recipes.
    case GgmlType::kQ4_1:
      return 3u;
    case GgmlType::kQ5_0:
      return 8u;
    case GgmlType::kQ5_1:
      return 9u;
    case GgmlType::kQ2_K:
      return 10u;
    case GgmlType::kQ3_K:
      return 11u;  // Q3_K_S
    case GgmlType::kQ4_K:
      return 14u;  // Q4_K_S
    case GgmlType::kQ5_K:
      return 16u;  // Q5_K_S
    case GgmlType::kQ6_K:
      return 18u;
    case GgmlType::kIQ4_NL:
      return 25u;
    case GgmlType::kMXFP4:
      return 38u;  // MXFP4_MOE, the one llama_ftype with MXFP4
    default:
      return Status::InvalidArgument(std::string("cannot convert to type ") + GgmlTypeName(type) +
                                     " (supported: " + kTargetTypes + ")");
  }
}

Result<GgufConverter> GgufConverter::Create(const GgufFile& source, GgmlType type) {
  KVSERVE_RETURN_IF_ERROR(LlamaFileType(type));
  return Create(source, QuantRecipe::Uniform(type));
}

Result<GgufConverter> GgufConverter::Create(const GgufFile& source, const QuantRecipe& recipe) {
  GgufConverter converter(source, recipe);
  const QuantModelShape shape = ShapeOf(source);
  const bool tied = source.FindTensor("output.weight") == nullptr;
  for (const TensorInfo& tensor : source.tensors()) {
    if (!TraitsOf(tensor.type).supported) {
      return Status::InvalidArgument(source.path() + ": tensor '" + tensor.name + "' has type " +
                                     GgmlTypeName(tensor.type) + ", which kvserve cannot decode " +
                                     "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, " +
                                     "IQ4_NL, MXFP4, Q2_K..Q6_K)");
    }
    const bool is_output =
        tensor.name == "output.weight" || (tied && tensor.name == "token_embd.weight");
    TensorPlan plan{.source = &tensor,
                    .type = recipe.TypeOf(tensor.name, shape, is_output, tensor.dim(2))};
    // As llama-quantize: only matrices named *.weight are converted; vectors (one row, as its
    // ggml_n_dims counts: qwen35moe's [n_embd, 1] ffn_gate_inp_shexp too) and other tensors
    // (gpt-oss's 2-D expert biases) are kept in F32.
    if (tensor.n_elements == static_cast<uint64_t>(tensor.dims[0]) ||
        !tensor.name.ends_with(".weight")) {
      plan.type = GgmlType::kF32;
    } else {
      const GgmlType wanted = plan.wanted = plan.type;
      if (tensor.dims[0] % TraitsOf(plan.type).block_elements != 0) {
        plan.type = SuperBlockFallback(plan.type);
      }
      if (IsBlockType(plan.type) && tensor.dims[0] % TraitsOf(plan.type).block_elements != 0) {
        plan.type = GgmlType::kF16;
      }
      plan.fallback = plan.type != wanted;
    }
    converter.plan_.push_back(plan);
  }
  return converter;
}

std::vector<std::string> GgufConverter::Notes() const {
  std::vector<std::string> notes;
  for (const TensorPlan& plan : plan_) {
    if (!plan.fallback) continue;
    notes.push_back("tensor '" + plan.source->name + "' " + plan.source->ShapeString() +
                    ": row length " + std::to_string(plan.source->dims[0]) +
                    " is not a multiple of the " + GgmlTypeName(plan.wanted) + " block size " +
                    std::to_string(TraitsOf(plan.wanted).block_elements) + "; stored as " +
                    GgmlTypeName(plan.type));
  }
  return notes;
}

uint64_t GgufConverter::OutputTensorBytes() const {
  uint64_t total = 0;
  for (const TensorPlan& plan : plan_) {
    total += RowBytes(plan.type, static_cast<int64_t>(plan.source->n_elements));
  }
  return total;
}

void GgufConverter::AddTo(GgufWriter& writer) const {
  const bool quantized = IsBlockType(type_);
  for (const auto& [key, value] : source_->metadata()) writer.CopyValue(key, value);
  writer.SetUint32("general.file_type", file_type_);
  if (quantized) writer.SetUint32("general.quantization_version", kQuantizationVersion);
  for (const TensorPlan& plan : plan_) {
    writer.AddTensor(plan.source->name, plan.type, plan.source->dims,
                     [plan](const ByteSink& sink) { return Produce(plan, sink); });
  }
}

Status GgufConverter::WriteFile(const std::string& path) const {
  GgufWriter writer(source_->alignment());
  AddTo(writer);
  return writer.WriteFile(path);
}

Status GgufConverter::Produce(const TensorPlan& plan, const ByteSink& sink) {
  const TensorInfo& source = *plan.source;
  if (source.type == plan.type) return sink(source.data, source.n_bytes);
  // Blocks never straddle rows (row lengths are multiples of the block size of every block type
  // involved), so the tensor can be walked as one flat run of elements in whole-block chunks.
  const auto n_elements = static_cast<int64_t>(source.n_elements);
  const int64_t chunk = std::min(kChunkElements, n_elements);
  std::vector<float> values(chunk);
  std::vector<uint8_t> encoded(RowBytes(plan.type, chunk));
  for (int64_t begin = 0; begin < n_elements; begin += chunk) {
    const int64_t n = std::min(chunk, n_elements - begin);
    DequantizeRow(source.type, source.data + RowBytes(source.type, begin), n, values.data());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(values[i])) {
        return Status::InvalidArgument("tensor '" + source.name + "': element " +
                                       std::to_string(begin + i) + " is " +
                                       std::to_string(values[i]) + "; refusing to convert " +
                                       "a model with non-finite weights");
      }
    }
    QuantizeRow(plan.type, values.data(), n, encoded.data());
    KVSERVE_RETURN_IF_ERROR(sink(encoded.data(), RowBytes(plan.type, n)));
  }
  return Status::Ok();
}

}  // namespace kvserve
